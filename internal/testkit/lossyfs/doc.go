// Package lossyfs is a test file system that loses what a power cut loses.
// In the spirit of Jepsen's LazyFS, it serves a backing directory over FUSE
// and keeps in memory every change that has not been made durable yet; Cut
// simulates the power cut: the unsynced changes are dropped (or a prefix of
// them is kept, the last one torn), the backing directory is left holding
// exactly what a disk could hold after the power came back, and the mounted
// file system dies under its users, every operation failing with EIO.
//
// A process killed with SIGKILL keeps everything it wrote, because the page
// cache survives it; only a power loss (or a kernel crash) shows whether a
// program's fsyncs are in the right places. This package is for testing
// exactly that, on a machine that keeps its power.
//
// # The model: what is durable when
//
// The file system holds two states: the one its users see, and the durable
// one (what the disk holds). Every change the users make goes to the first
// at once and is appended to a queue of pending changes, in the order the
// file system received them. A change leaves the queue and reaches the
// durable state only when it is synced:
//
//   - Data (write, and truncate or O_TRUNC, which change a file's size) is
//     durable once the file is synced with fsync or fdatasync (the two are
//     the same here), through any descriptor of it. A file opened with
//     O_SYNC or O_DSYNC syncs after every write.
//   - A directory entry — its creation (create, mkdir), its removal (unlink,
//     rmdir) and a rename — is durable once the directory holding it is
//     synced (fsync of a descriptor of the directory). A rename between two
//     directories is durable once either is synced, and with it every
//     pending change of entries in both: it never leaves the entry in both
//     or in neither, nor lets an older change land after it.
//   - Syncing a file does not make its name durable, and syncing a directory
//     does not make the data of its files durable: a new file needs both,
//     and a new file whose data is synced but whose directory is not is gone
//     after the cut, with its data. A directory's own entry lives in its
//     parent, so a new directory needs its parent synced too.
//   - sync(2) and syncfs(2) do not reach a FUSE file system and sync
//     nothing; nor do msync or sync_file_range. Permission bits, owners
//     and times are not modelled: they are kept as they are.
//
// Cut cuts the power when it is called; CutAfter arms a cut that happens
// right after the n-th change or sync from then on, inside the request
// that made it, so that a cut can land between a write and its sync, or
// right after a sync returned. Either applies one of two outcomes to the
// queue:
//
//   - DropUnsynced: every pending change is lost. The durable state is
//     what was synced, nothing more.
//   - KeepPrefix: the disk had written some of the pending changes when the
//     power went, in the order they were made: a prefix of the queue,
//     chosen with the caller's random source, is kept. A write is kept in
//     units of 4 KiB pages (the pieces of the write between page
//     boundaries of the file), so the last change kept may be a write torn
//     at a page boundary. Creations, removals, renames and truncates are
//     kept whole or not at all.
//
// The durable state is written to the backing directory at the cut (and at
// a clean Unmount, which keeps everything, as an orderly shutdown does);
// until then the backing directory holds what it held at Mount and must
// not be touched. After a cut the file system answers every operation
// with EIO until it is unmounted; the kernel may still serve reads it has
// cached. A new Mount on the same backing directory is the machine coming
// back: it sees the surviving bytes and nothing else.
//
// What is not supported: hard links, symbolic links, special files,
// extended attributes and fallocate; a backing directory holding anything
// but regular files and directories is refused at Mount. Everything is
// held in memory (pages of zeros take none), so it suits the data
// directories of tests, not large files.
//
// # Using it
//
// Mount and Unmount are the whole life cycle (Abort for a cleanup that
// cannot wait for files on the mount to be closed); MountForTest does both
// for a test, under t.TempDir(), skipping (or with CI=true failing) when
// the host cannot mount FUSE (Available says what it lacks).
//
// The process that serves a mount must not read files on it through a
// memory mapping (bbolt does): a page fault on the mount can wait on a
// FUSE request that the same process's stopped goroutines would have to
// answer. Run such code in a child process.
//
// A power-loss cycle for a process P with its data on the mount:
//
//	fs, _ := lossyfs.Mount(backing, mnt, lossyfs.Options{})
//	// start P with its data directory under mnt; let it work
//	report, _ := fs.Cut(lossyfs.KeepPrefix, rng) // P's disk is gone: its next I/O fails
//	// kill P with SIGKILL and wait for it to exit
//	_ = fs.Unmount()
//	_ = fs.Mount() // the power is back
//	// start P again on what survived
//
// Unmount aborts the FUSE connection as it unmounts, so a copy of the
// mount that another mount namespace took (ip netns exec makes one for
// each process it starts) cannot keep the old file system alive: start
// the process after Mount, and it sees the new one.
package lossyfs
