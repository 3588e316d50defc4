package lab_test

import (
	"testing"

	"github.com/causeway-net/causeway/pkg/lab/labtest"
)

func TestMain(m *testing.M) { labtest.Main(m) }
