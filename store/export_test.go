package store

// Hooks for the external tests (package store_test). They live in package
// store_test because they open databases through internal/dbtest, which
// imports store: an internal test importing it would be an import cycle.

// EncodeMetaFormat returns the meta/format record of a database of the given
// format version, encoded as the store encodes it.
func EncodeMetaFormat(format int) ([]byte, error) {
	return encode(recMeta, &metaRec{V: recordVersion, Format: format, CreatedBy: "strata-test"})
}

// EnvelopeHeader is the size of a stored value's envelope header.
const EnvelopeHeader = envelopeHeader
