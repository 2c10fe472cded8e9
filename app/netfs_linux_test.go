package app

import (
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// The statfs magic numbers of network filesystems name them; local ones
// (and a magic number whose high bit is set, read as a negative word) are
// told apart.
func TestNetworkFilesystemMagic(t *testing.T) {
	for _, tc := range []struct {
		magic  int64
		name   string
		remote bool
	}{
		{0x6969, "NFS", true},
		{0xff534d42, "CIFS", true},
		{int64(int32(-0xacb2be)), "CIFS", true}, // 0xff534d42 as a signed 32-bit word
		{0xfe534d42, "SMB2", true},
		{0x65735546, "FUSE (sshfs, rclone and the like: a network mount as far as Purser can tell)", true},
		{0xef53, "", false},     // ext4
		{0x01021994, "", false}, // tmpfs
		{0x58465342, "", false}, // xfs
		{0x9123683e, "", false}, // btrfs
		{0x794c7630, "", false}, // overlayfs
	} {
		name, remote := filesystemName(tc.magic)
		if name != tc.name || remote != tc.remote {
			t.Errorf("magic %#x: %q %v, want %q %v", tc.magic, name, remote, tc.name, tc.remote)
		}
	}
}

// A SQLite queue on a FUSE mount (sshfs, rclone) is refused as one on NFS
// is, with the reason: its statfs magic is injected, as no FUSE mount can
// be made here (issue 23 #15).
func TestQueueOnFUSEIsRefused(t *testing.T) {
	defer func(f func(string, *unix.Statfs_t) error) { statfs = f }(statfs)
	statfs = func(path string, st *unix.Statfs_t) error {
		st.Type = 0x65735546 // FUSE_SUPER_MAGIC
		return nil
	}
	err := refuseNetworkQueue("worker", Database{Path: filepath.Join(t.TempDir(), "q.db"), From: "--db"})
	if err == nil || !IsBadInput(err) {
		t.Fatalf("a queue on FUSE: %v, want it refused as bad input", err)
	}
	for _, want := range []string{"q.db (--db) is on a network filesystem (FUSE", "sshfs, rclone", "PostgreSQL"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal lacks %q: %v", want, err)
		}
	}
	if err := refuseNetworkQueue("worker", Database{Path: "postgres://h/db", From: "--db"}); err != nil {
		t.Errorf("a PostgreSQL queue refused for the FUSE mount it is not on: %v", err)
	}
}
