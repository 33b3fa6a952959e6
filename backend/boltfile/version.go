package boltfile

// FormatVersion returns the format of the open file: FormatVersion, the
// only one Open accepts.
func (b *Backend) FormatVersion() int { return FormatVersion }
