package app

import (
	"errors"
	"io/fs"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// networkFilesystems names the Linux filesystems (statfs f_type) that hosts
// share over a network: SQLite's locks are not to be trusted on them, and
// the hosts sharing one have no common clock for a job's lease.
var networkFilesystems = map[uint32]string{
	unix.NFS_SUPER_MAGIC:  "NFS",
	unix.SMB_SUPER_MAGIC:  "SMB",
	unix.SMB2_SUPER_MAGIC: "SMB2",
	unix.CIFS_SUPER_MAGIC: "CIFS",
	unix.AFS_SUPER_MAGIC:  "AFS",
	unix.AFS_FS_MAGIC:     "AFS",
	unix.CEPH_SUPER_MAGIC: "Ceph",
	unix.CODA_SUPER_MAGIC: "Coda",
	// FUSE: sshfs, rclone, s3fs and the like are network mounts whose
	// locks and clocks are the remote's (or none). A FUSE filesystem on a
	// local disk cannot be told from them by its magic, so it is refused
	// too: the reason says what to do.
	unix.FUSE_SUPER_MAGIC: "FUSE (sshfs, rclone and the like: a network mount as far as Purser can tell)",
}

// statfs is unix.Statfs; a test injects a filesystem's magic number.
var statfs = unix.Statfs

// networkFilesystem says whether path (or, for a file not yet created, its
// nearest existing parent directory) is on a network filesystem, and which.
// One statfs call: cheap enough to make before every queue command.
func networkFilesystem(path string) (string, bool) {
	p, err := filepath.Abs(path)
	if err != nil {
		return "", false
	}
	for {
		var st unix.Statfs_t
		err := statfs(p, &st)
		if err == nil {
			return filesystemName(int64(st.Type))
		}
		parent := filepath.Dir(p)
		if !errors.Is(err, fs.ErrNotExist) || parent == p {
			return "", false
		}
		p = parent
	}
}

// filesystemName is the network filesystem whose statfs f_type is magic.
// f_type is a signed word on some architectures: only its low 32 bits are
// the magic number.
func filesystemName(magic int64) (string, bool) {
	name, ok := networkFilesystems[uint32(magic)]
	return name, ok
}
