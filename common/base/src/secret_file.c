#include "drasync/secret_file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* read(2) until cap bytes or the end; the count, or -errno. */
static ssize_t read_all(int fd, char *buf, size_t cap)
{
	size_t len = 0;

	while (len < cap) {
		ssize_t n = read(fd, buf + len, cap - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		len += (size_t)n;
	}
	return (ssize_t)len;
}

int ds_secret_file_read(const char *path, const char *what, bool secret, char *buf, size_t cap,
			ds_err *err)
{
	struct stat st;
	ssize_t len, more;
	char extra;
	int fd, rc;

	if (cap < 2)
		return -EINVAL;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0 && errno == ELOOP)
		fd = open(path, O_RDONLY | O_CLOEXEC); /* Kubernetes mounts Secrets as symlinks */
	if (fd < 0) {
		rc = -errno;
		ds_err_set(err, "cannot open %s %s: %s", what, path, strerror(-rc));
		return rc;
	}
	if (fstat(fd, &st) != 0) {
		rc = -errno;
		ds_err_set(err, "cannot stat %s %s: %s", what, path, strerror(-rc));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = -EINVAL;
		ds_err_set(err, "%s %s is not a regular file", what, path);
		goto out;
	}
	if (secret && (st.st_mode & 077)) {
		rc = -EPERM;
		ds_err_setloc(err, path, 0, 0,
			      "%s is accessible by group or others (mode %04o); refusing it: run "
			      "chmod 600 %s",
			      what, (unsigned)(st.st_mode & 07777), path);
		goto out;
	}
	len = read_all(fd, buf, cap - 1);
	more = len == (ssize_t)(cap - 1) ? read_all(fd, &extra, 1) : 0;
	if (len < 0 || more < 0) {
		rc = (int)(len < 0 ? len : more);
		ds_err_set(err, "cannot read %s %s: %s", what, path, strerror(-rc));
		goto out;
	}
	if (more > 0) {
		rc = -EBADMSG;
		ds_err_setloc(err, path, 0, 0, "%s larger than %zu bytes", what, cap - 1);
		goto out;
	}
	buf[len] = '\0';
	rc = (int)len;
out:
	if (rc < 0)
		explicit_bzero(buf, cap);
	close(fd);
	return rc;
}
