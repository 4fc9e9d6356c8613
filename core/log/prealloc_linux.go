package log

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// fallocateKeepSize reserves [off, off+n) of f without changing its size.
func fallocateKeepSize(f *os.File, off, n int64) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) {
		ferr = unix.Fallocate(int(fd), unix.FALLOC_FL_KEEP_SIZE, off, n)
	}); err != nil {
		return err
	}
	return ferr
}

// unsupported reports a file system that cannot reserve blocks this way.
func unsupported(err error) bool {
	return errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EINVAL)
}
