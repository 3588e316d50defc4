package daemon

import "testing"

func TestCheckPorts(t *testing.T) {
	if err := CheckPorts(map[string]int{"A_PORT": 0, "B_PORT": 65535}); err != nil {
		t.Fatalf("valid ports refused: %v", err)
	}
	err := CheckPorts(map[string]int{"B_PORT": 70000, "A_PORT": -1, "C_PORT": 80})
	want := "A_PORT: -1 is not a port (0-65535)\nB_PORT: 70000 is not a port (0-65535)"
	if err == nil || err.Error() != want {
		t.Fatalf("CheckPorts = %v, want %q", err, want)
	}
}
