package integration

import (
	"flag"
	"os"
	"strconv"
	"testing"
)

// processTestsAtOnce is how many tests run at once unless -test.parallel
// says otherwise. A test here spends most of its time waiting on its
// processes (start-up, elections, session timeouts) rather than on the
// CPU: the default, one test per CPU, leaves a two-core machine mostly
// idle. Each test has its own ports (freePortBase) and directories.
const processTestsAtOnce = 4

func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		if err := flag.Set("test.parallel", strconv.Itoa(processTestsAtOnce)); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}
