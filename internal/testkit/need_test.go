package testkit

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
)

// fakeTB records how a test ended. Skipf and Fatalf end the goroutine as
// the real ones do, so a helper that goes on after them is caught.
type fakeTB struct {
	testing.TB
	skipped, failed string
	logs            []string
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Skipf(format string, args ...any) {
	f.skipped = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (f *fakeTB) Logf(format string, args ...any) {
	f.logs = append(f.logs, fmt.Sprintf(format, args...))
}

// run calls fn with a fresh fakeTB on a goroutine of its own and reports
// whether fn returned (rather than ending the goroutine).
func run(fn func(tb testing.TB)) (f *fakeTB, returned bool) {
	f = &fakeTB{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
		returned = true
	}()
	<-done
	return f, returned
}

func TestNeed(t *testing.T) {
	missing := errors.New("/usr/share/java/zookeeper.jar is missing")
	for _, tc := range []struct {
		name, ci    string
		err         error
		skip, fail  string
		wantReturns bool
	}{
		{name: "there, outside CI", err: nil, wantReturns: true},
		{name: "there, in CI", ci: "true", err: nil, wantReturns: true},
		{name: "missing, outside CI", err: missing,
			skip: "a ZooKeeper server is missing: /usr/share/java/zookeeper.jar is missing"},
		{name: "missing, CI=false", ci: "false", err: missing,
			skip: "a ZooKeeper server is missing: /usr/share/java/zookeeper.jar is missing"},
		{name: "missing, in CI", ci: "true", err: missing,
			fail: "CI=true and a ZooKeeper server is missing: /usr/share/java/zookeeper.jar is missing"},
		{name: "missing, CI=1", ci: "1", err: missing,
			fail: "CI=1 and a ZooKeeper server is missing: /usr/share/java/zookeeper.jar is missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("CI", tc.ci)
			f, returned := run(func(tb testing.TB) { Need(tb, "a ZooKeeper server", tc.err) })
			if returned != tc.wantReturns || f.skipped != tc.skip || f.failed != tc.fail {
				t.Errorf("returned %v, skipped %q, failed %q; want returned %v, skipped %q, failed %q",
					returned, f.skipped, f.failed, tc.wantReturns, tc.skip, tc.fail)
			}
		})
	}
}

func TestMissing(t *testing.T) {
	t.Setenv("CI", "")
	f, returned := run(func(tb testing.TB) { Missing(tb, "kcat", "not on PATH") })
	if returned || f.skipped != "kcat is missing: not on PATH" || f.failed != "" {
		t.Errorf("outside CI: returned %v, skipped %q, failed %q", returned, f.skipped, f.failed)
	}
	t.Setenv("CI", "true")
	f, returned = run(func(tb testing.TB) { Missing(tb, "kcat", "not on PATH") })
	if returned || f.failed != "CI=true and kcat is missing: not on PATH" || f.skipped != "" {
		t.Errorf("in CI: returned %v, skipped %q, failed %q", returned, f.skipped, f.failed)
	}
}

func TestNeedInCI(t *testing.T) {
	missing := errors.New("running as uid 1000")
	t.Setenv("CI", "")
	var ok bool
	f, returned := run(func(tb testing.TB) { ok = NeedInCI(tb, "root", missing) })
	if !returned || ok || f.skipped != "" || f.failed != "" || len(f.logs) != 1 || !strings.Contains(f.logs[0], "root is missing") {
		t.Errorf("outside CI: returned %v ok %v, skipped %q, failed %q, logs %q", returned, ok, f.skipped, f.failed, f.logs)
	}
	f, returned = run(func(tb testing.TB) { ok = NeedInCI(tb, "root", nil) })
	if !returned || !ok || len(f.logs) != 0 {
		t.Errorf("there: returned %v ok %v, logs %q", returned, ok, f.logs)
	}
	t.Setenv("CI", "true")
	f, returned = run(func(tb testing.TB) { ok = NeedInCI(tb, "root", missing) })
	if returned || f.failed != "CI=true and root is missing: running as uid 1000" {
		t.Errorf("in CI: returned %v, failed %q", returned, f.failed)
	}
}

// TestNeedEndsARealTest runs a real test that needs something missing, in
// a child process: it is reported as skipped, and with CI=true as failed,
// with the message.
func TestNeedEndsARealTest(t *testing.T) {
	if os.Getenv("TESTKIT_NEED_HELPER") != "" {
		t.Skip("helper process only; started by TestNeedEndsARealTest")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, ci := range []string{"", "true"} {
		cmd := exec.Command(exe, "-test.run=^TestNeedHelperProcess$", "-test.v")
		cmd.Env = append(os.Environ(), "TESTKIT_NEED_HELPER=1", "CI="+ci)
		out, err := cmd.CombinedOutput()
		switch ci {
		case "":
			if err != nil || !strings.Contains(string(out), "--- SKIP: TestNeedHelperProcess") ||
				!strings.Contains(string(out), "fuse3 is missing: /dev/fuse: no such file") {
				t.Errorf("outside CI: %v\n%s", err, out)
			}
		default:
			if err == nil || !strings.Contains(string(out), "--- FAIL: TestNeedHelperProcess") ||
				!strings.Contains(string(out), "CI=true and fuse3 is missing: /dev/fuse: no such file") ||
				strings.Contains(string(out), "went on") {
				t.Errorf("with CI=true: %v\n%s", err, out)
			}
		}
	}
}

func TestNeedHelperProcess(t *testing.T) {
	if os.Getenv("TESTKIT_NEED_HELPER") == "" {
		t.Skip("helper process only; started by TestNeedEndsARealTest")
	}
	Need(t, "fuse3", errors.New("/dev/fuse: no such file"))
	t.Log("went on")
}
