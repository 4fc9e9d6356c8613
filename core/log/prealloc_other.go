//go:build !linux

package log

import (
	"errors"
	"os"
)

var errNoPrealloc = errors.New("log: block reservation needs linux")

func fallocateKeepSize(*os.File, int64, int64) error { return errNoPrealloc }

func unsupported(error) bool { return true }
