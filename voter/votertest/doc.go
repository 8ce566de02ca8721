// Package votertest runs clusters of real voters inside one test process:
// real raft, real log and bolt files in t.TempDir(), real TCP on 127.0.0.1 with
// ports chosen by the kernel. Nothing is mocked, so a test that passes here
// exercised the same code paths as a deployment, only with FastTimeouts.
//
// Waiting is always a polled condition with a deadline (WaitFor); a test
// never sleeps and hopes. Clusters shut down through t.Cleanup.
package votertest
