#include "drasync/keys.h"
#include "drasync/secret_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

/* A key file is tiny; anything bigger is not one of ours. */
#define KEY_FILE_MAX 4096 /* bytes */

static const char z85_chars[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
				".-:+=^!/*?&<>()[]{}@%$#";

bool ds_keys_z85_valid(const char *text)
{
	uint8_t raw[32];

	if (!text || strlen(text) != DS_KEY_Z85_LEN)
		return false;
	for (const char *p = text; *p; p++)
		if (!strchr(z85_chars, *p))
			return false;
	return zmq_z85_decode(raw, text) != NULL;
}

int ds_keys_generate(ds_keypair *out, ds_err *err)
{
	ds_keypair kp;

	if (!zmq_has("curve")) {
		ds_err_set(err, "libzmq was built without CURVE support");
		return -ENOTSUP;
	}
	if (zmq_curve_keypair(kp.public_z85, kp.secret_z85) != 0) {
		int e = errno;
		ds_err_set(err, "cannot generate a CURVE key pair: %s", zmq_strerror(e));
		return -e;
	}
	*out = kp;
	return 0;
}

static int write_file(const char *path, const char *text, mode_t mode, bool force, ds_err *err)
{
	int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (force ? O_TRUNC : O_EXCL);
	size_t len = strlen(text);
	ssize_t n;
	int fd, rc = 0;

	fd = open(path, flags, mode);
	if (fd < 0) {
		rc = -errno;
		if (rc == -EEXIST)
			ds_err_set(err, "%s already exists (refusing to overwrite a key)", path);
		else
			ds_err_set(err, "cannot create %s: %s", path, strerror(-rc));
		return rc;
	}
	/* open() honours the umask and an existing file keeps its mode: set it. */
	if (fchmod(fd, mode) != 0) {
		rc = -errno;
		ds_err_set(err, "cannot chmod %s: %s", path, strerror(-rc));
		goto out;
	}
	n = write(fd, text, len);
	if (n < 0 || (size_t)n != len || fsync(fd) != 0) {
		rc = n < 0 ? -errno : -EIO;
		ds_err_set(err, "cannot write %s: %s", path, strerror(-rc));
		goto out;
	}
out:
	if (close(fd) != 0 && rc == 0) {
		rc = -errno;
		ds_err_set(err, "cannot write %s: %s", path, strerror(-rc));
	}
	return rc;
}

int ds_keys_write(const char *dir, const char *name, const ds_keypair *kp, bool force, ds_err *err)
{
	char key_path[4096], pub_path[4096], text[256];
	struct stat st;
	int rc;

	if (!dir || !name || !kp) {
		ds_err_set(err, "keys: a directory, a name and a key pair are required");
		return -EINVAL;
	}
	if (!name[0] || strchr(name, '/')) {
		ds_err_set(err, "key name '%s' is not a plain file name", name);
		return -EINVAL;
	}
	if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
		rc = -errno;
		ds_err_set(err, "cannot create directory %s: %s", dir, strerror(-rc));
		return ds_err_fallback(err, rc);
	}
	if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
		ds_err_set(err, "%s is not a directory", dir);
		return -ENOTDIR;
	}
	if ((size_t)snprintf(key_path, sizeof(key_path), "%s/%s.key", dir, name) >=
		sizeof(key_path) ||
	    (size_t)snprintf(pub_path, sizeof(pub_path), "%s/%s.pub", dir, name) >=
		sizeof(pub_path)) {
		ds_err_set(err, "path too long: %s", dir);
		return -ENAMETOOLONG;
	}
	if (!force && (access(key_path, F_OK) == 0 || access(pub_path, F_OK) == 0)) {
		ds_err_set(err, "%s/%s.key or .pub already exists (refusing to overwrite a key)",
			   dir, name);
		return -EEXIST;
	}
	snprintf(text, sizeof(text),
		 "# drasync CURVE secret key (Z85). Keep it private: mode 0600.\n%s\n",
		 kp->secret_z85);
	rc = write_file(key_path, text, 0600, force, err);
	if (rc < 0)
		return ds_err_fallback(err, rc);
	snprintf(text, sizeof(text), "# drasync CURVE public key (Z85).\n%s\n", kp->public_z85);
	return ds_err_fallback(err, write_file(pub_path, text, 0644, force, err));
}

/* Read a key file: '#' comments and blank lines, then exactly one Z85 key line. */
static int read_key_file(const char *path, bool secret, char out[DS_KEY_Z85_LEN + 1], ds_err *err)
{
	char buf[KEY_FILE_MAX + 1];
	char key[DS_KEY_Z85_LEN + 1] = "";
	int rc, lineno = 0, found = 0;
	char *line, *save = NULL;

	rc = ds_secret_file_read(path, secret ? "secret key file" : "key file", secret, buf,
				 sizeof(buf), err);
	if (rc < 0)
		return rc;
	rc = 0;
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		size_t l;
		lineno++;
		while (*line == ' ' || *line == '\t')
			line++;
		l = strlen(line);
		while (l > 0 && (line[l - 1] == ' ' || line[l - 1] == '\t' || line[l - 1] == '\r'))
			line[--l] = '\0';
		if (l == 0 || line[0] == '#')
			continue;
		if (found || !ds_keys_z85_valid(line)) {
			rc = -EBADMSG;
			ds_err_setloc(err, path, lineno, 1,
				      found ? "more than one key in the file"
					    : "not a 40-character Z85 CURVE key");
			goto out;
		}
		memcpy(key, line, DS_KEY_Z85_LEN + 1);
		found = 1;
	}
	if (!found) {
		rc = -EBADMSG;
		ds_err_setloc(err, path, 0, 0, "no key in the file");
		goto out;
	}
	memcpy(out, key, sizeof(key));
out:
	/* The buffer held a secret: do not leave it on the stack. */
	explicit_bzero(buf, sizeof(buf));
	explicit_bzero(key, sizeof(key));
	return rc;
}

int ds_keys_load_secret(const char *path, ds_keypair *out, ds_err *err)
{
	ds_keypair kp;
	int rc;

	rc = read_key_file(path, true, kp.secret_z85, err);
	if (rc < 0)
		return ds_err_fallback(err, rc);
	if (zmq_curve_public(kp.public_z85, kp.secret_z85) != 0) {
		explicit_bzero(&kp, sizeof(kp));
		ds_err_setloc(err, path, 0, 0, "cannot derive the public key");
		return -EBADMSG;
	}
	*out = kp;
	explicit_bzero(&kp, sizeof(kp));
	return 0;
}

int ds_keys_load_public(const char *path, char out[DS_KEY_Z85_LEN + 1], ds_err *err)
{
	return ds_err_fallback(err, read_key_file(path, false, out, err));
}
