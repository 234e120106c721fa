#!/usr/bin/python3
"""A loopback FUSE file system whose writes stall on command, for disk-stall-run.ts.

    stall-fs.py BACKING_DIR MOUNT_POINT CONTROL_FILE

While CONTROL_FILE exists, every call that changes data (write, fsync, flush, truncate,
fallocate) waits until it is removed; reads, lookups and directory listings keep working,
as on a disk whose write queue is stuck while its cache still answers reads. Runs in the
foreground and multi-threaded: a stalled write must not hold up a read in another thread.
Needs python3-fusepy and libfuse2 (Debian/Ubuntu package names).
"""
import errno
import os
import sys
import time

from fusepy import FUSE, FuseOSError, Operations


class StallFs(Operations):
    def __init__(self, root, control):
        self.root = os.path.realpath(root)
        self.control = control

    def _path(self, path):
        return os.path.join(self.root, path.lstrip('/'))

    def _wait_while_stalled(self):
        # Polled rather than signalled: the control file is created and removed by another
        # process, and a few tens of milliseconds of lateness do not matter to a stall of seconds.
        while os.path.exists(self.control):
            time.sleep(0.02)

    def __call__(self, op, *args):
        try:
            return super().__call__(op, *args)
        except OSError as e:
            raise FuseOSError(e.errno or errno.EIO)

    # Metadata and reads: never stalled.
    def access(self, path, mode):
        if not os.access(self._path(path), mode):
            raise FuseOSError(errno.EACCES)

    def getattr(self, path, fh=None):
        st = os.lstat(self._path(path))
        keys = ('st_atime', 'st_ctime', 'st_gid', 'st_mode', 'st_mtime', 'st_nlink', 'st_size', 'st_uid')
        return {k: getattr(st, k) for k in keys}

    def readdir(self, path, fh):
        return ['.', '..'] + os.listdir(self._path(path))

    def statfs(self, path):
        st = os.statvfs(self._path(path))
        keys = ('f_bavail', 'f_bfree', 'f_blocks', 'f_bsize', 'f_favail', 'f_ffree', 'f_files',
                'f_flag', 'f_frsize', 'f_namemax')
        return {k: getattr(st, k) for k in keys}

    def open(self, path, flags):
        return os.open(self._path(path), flags)

    def read(self, path, size, offset, fh):
        return os.pread(fh, size, offset)

    def release(self, path, fh):
        return os.close(fh)

    # Namespace changes: not stalled (the store creates its files once, at start-up).
    def chmod(self, path, mode):
        return os.chmod(self._path(path), mode)

    def chown(self, path, uid, gid):
        return os.chown(self._path(path), uid, gid)

    def create(self, path, mode, fi=None):
        return os.open(self._path(path), os.O_RDWR | os.O_CREAT, mode)

    def mknod(self, path, mode, dev):
        # The proxy binds a unix socket in its data directory.
        return os.mknod(self._path(path), mode, dev)

    def mkdir(self, path, mode):
        return os.mkdir(self._path(path), mode)

    def rmdir(self, path):
        return os.rmdir(self._path(path))

    def unlink(self, path):
        return os.unlink(self._path(path))

    def rename(self, old, new):
        return os.rename(self._path(old), self._path(new))

    def utimens(self, path, times=None):
        return os.utime(self._path(path), times)

    # Data changes: stalled while the control file exists.
    def write(self, path, data, offset, fh):
        self._wait_while_stalled()
        return os.pwrite(fh, data, offset)

    def truncate(self, path, length, fh=None):
        self._wait_while_stalled()
        with open(self._path(path), 'r+') as f:
            f.truncate(length)

    def fallocate(self, path, mode, offset, length, fh):
        self._wait_while_stalled()
        return os.posix_fallocate(fh, offset, length)

    def flush(self, path, fh):
        self._wait_while_stalled()
        return 0

    def fsync(self, path, datasync, fh):
        self._wait_while_stalled()
        return os.fdatasync(fh) if datasync else os.fsync(fh)


def main():
    if len(sys.argv) != 4:
        sys.exit('usage: stall-fs.py BACKING_DIR MOUNT_POINT CONTROL_FILE')
    backing, mount_point, control = sys.argv[1:]
    # Not direct_io: LMDB maps its files, and mmap over FUSE needs the page cache.
    FUSE(StallFs(backing, control), mount_point, foreground=True, nothreads=False,
         allow_other=False)


if __name__ == '__main__':
    main()
