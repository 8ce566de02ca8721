package nemesis

import (
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// On SIGINT or SIGTERM the process runs every registered cleanup, then
// dies of the signal as it would have: a Ctrl-C during a run must not
// leave a namespace, its processes or its rules behind.
var interrupts struct {
	mu        sync.Mutex
	next      int
	fns       map[int]func()
	installed bool
}

// OnInterrupt registers fn to run if the process gets SIGINT or SIGTERM,
// and returns the function that unregisters it (call it once fn has run
// the normal way).
func OnInterrupt(fn func()) (remove func()) {
	interrupts.mu.Lock()
	defer interrupts.mu.Unlock()
	if interrupts.fns == nil {
		interrupts.fns = map[int]func(){}
	}
	if !interrupts.installed {
		interrupts.installed = true
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
		go func() {
			sig := <-ch
			runInterruptCleanups()
			signal.Reset(syscall.SIGINT, syscall.SIGTERM)
			_ = syscall.Kill(os.Getpid(), sig.(syscall.Signal))
		}()
	}
	id := interrupts.next
	interrupts.next++
	interrupts.fns[id] = fn
	return func() {
		interrupts.mu.Lock()
		delete(interrupts.fns, id)
		interrupts.mu.Unlock()
	}
}

func runInterruptCleanups() {
	interrupts.mu.Lock()
	fns := make([]func(), 0, len(interrupts.fns))
	for id, fn := range interrupts.fns {
		fns = append(fns, fn)
		delete(interrupts.fns, id)
	}
	interrupts.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
}
