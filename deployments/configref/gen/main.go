// Command gen writes the configuration reference (configref.File) and the
// configuration tables of the docs (configref.Docs) from the binaries' configuration structs;
// `go generate ./deployments/configref` runs it.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/causeway-net/causeway/deployments/configref"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "configref:", err)
		os.Exit(1)
	}
}

func run() error {
	ref, err := configref.Build()
	if err != nil {
		return err
	}
	out, err := ref.Marshal()
	if err != nil {
		return err
	}
	// go generate runs in the package directory, two levels below the root.
	root := filepath.Join("..", "..")
	if err := os.WriteFile(filepath.Join(root, configref.File), out, 0o644); err != nil {
		return err
	}
	var found [][]string
	for _, name := range configref.Docs {
		path := filepath.Join(root, name)
		old, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		updated, names, err := ref.UpdateTables(old)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if err := os.WriteFile(path, updated, 0o644); err != nil {
			return err
		}
		found = append(found, names)
	}
	return ref.CheckPlacement(found)
}
