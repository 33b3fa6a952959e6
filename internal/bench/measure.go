package bench

import (
	bolt "go.etcd.io/bbolt"
)

// BoltPages returns the page size and the high-water mark, in bytes, of the
// bbolt file at path (closed): what its data occupies, without the room
// bbolt grows the file by ahead of it.
func BoltPages(path string) (pageSize int, used int64, err error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		return 0, 0, err
	}
	defer db.Close()
	err = db.View(func(tx *bolt.Tx) error {
		used = tx.Size()
		return nil
	})
	return db.Info().PageSize, used, err
}
