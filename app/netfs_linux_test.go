package app

import "testing"

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
