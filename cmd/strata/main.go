package main
import (
 _ "go.etcd.io/bbolt"
 _ "github.com/vmihailenco/msgpack/v5"
 _ "github.com/cockroachdb/errors"
 _ "github.com/spf13/cobra"
)
func main(){}
