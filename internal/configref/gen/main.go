// Command gen writes the configuration reference (configref.File) and the
// README's configuration tables from the binaries' configuration structs;
// `go generate ./internal/configref` runs it.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/causeway-net/causeway/internal/configref"
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
	readme := filepath.Join(root, configref.README)
	old, err := os.ReadFile(readme)
	if err != nil {
		return err
	}
	updated, err := ref.UpdateREADME(old)
	if err != nil {
		return err
	}
	return os.WriteFile(readme, updated, 0o644)
}
