package lbstub_test

import (
	"testing"

	"github.com/causeway-net/causeway/pkg/lab/labtest"
	"github.com/causeway-net/causeway/pkg/lab/lbstub"
)

// TestMain also runs the stub of a test's child process (labtest.StartChild).
func TestMain(m *testing.M) { labtest.StubMain(m, "lb stub", lbstub.Run) }
