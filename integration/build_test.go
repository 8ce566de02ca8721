package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
	buildOut  []byte
)

// ctrlnode builds the binary once per test run and returns its path.
func ctrlnode(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "ctrlnode-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "ctrlnode")
		cmd := exec.Command("go", "build", "-race", "-o", binPath, "github.com/ctrlquorum/ctrlquorum/cmd/ctrlnode")
		buildOut, buildErr = cmd.CombinedOutput()
	})
	if buildErr != nil {
		t.Fatalf("build ctrlnode: %v\n%s", buildErr, buildOut)
	}
	return binPath
}
