/* STATE_DIR/agent.json: the running agent's pid and link state for `status`. */
#include "drasync/agent_state.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

int ds_agent_state_path(const char *state_dir, char *buf, size_t size)
{
	int n = snprintf(buf, size, "%s/agent.json", state_dir);

	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

int ds_agent_state_write(const char *state_dir, const ds_agent_state *st, ds_err *err)
{
	char path[4096], tmp[4200];
	json_t *o = NULL;
	char *text = NULL;
	int fd = -1, rc = 0;
	size_t len;

	if (ds_agent_state_path(state_dir, path, sizeof(path)) < 0) {
		ds_err_set(err, "state directory path too long: %s", state_dir);
		return -ENAMETOOLONG;
	}
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	o = json_pack("{sI ss sb sI sI ss ss ss sI sI ss}", "pid", (json_int_t)st->pid, "endpoint",
		      st->endpoint, "connected", st->connected, "sinceMs", (json_int_t)st->since_ms,
		      "startedMs", (json_int_t)st->started_ms, "lastEvent", st->last_event,
		      "lastDetail", st->last_detail, "schedule", st->schedule, "nextPassMs",
		      (json_int_t)st->next_pass_ms, "bandwidth", (json_int_t)st->bandwidth, "proxy",
		      st->proxy);
	if (o) /* the wire's figures */
		json_object_set_new(
		    o, "wire",
		    json_pack("{sI sI sI sI sI sI sb}", "sent", (json_int_t)st->wire.sent,
			      "received", (json_int_t)st->wire.received, "json",
			      (json_int_t)st->wire.json, "sessionSent",
			      (json_int_t)st->wire.session_sent, "sessionReceived",
			      (json_int_t)st->wire.session_received, "sessionJson",
			      (json_int_t)st->wire.session_json, "zbatch", st->wire.zbatch));
	if (!o || !(text = json_dumps(o, JSON_SORT_KEYS | JSON_COMPACT))) {
		ds_err_set(err, "out of memory");
		rc = -ENOMEM;
		goto out;
	}
	len = strlen(text);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, text, len) != (ssize_t)len || fsync(fd) < 0) {
		rc = -errno;
		ds_err_set(err, "writing %s: %s", tmp, strerror(errno));
		goto out;
	}
	if (close(fd) < 0) {
		fd = -1;
		rc = -errno;
		ds_err_set(err, "writing %s: %s", tmp, strerror(errno));
		goto out;
	}
	fd = -1;
	if (rename(tmp, path) < 0) {
		rc = -errno;
		ds_err_set(err, "renaming %s to %s: %s", tmp, path, strerror(errno));
	}
out:
	if (fd >= 0)
		close(fd);
	free(text);
	json_decref(o);
	return rc;
}

static void copy_str(char *dst, size_t size, const json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));

	snprintf(dst, size, "%s", s ? s : "");
}

static int64_t get_int(const json_t *o, const char *key)
{
	return (int64_t)json_integer_value(json_object_get(o, key));
}

int ds_agent_state_read(const char *state_dir, ds_agent_state *st, bool *running, ds_err *err)
{
	char path[4096];
	json_error_t je;
	json_t *o;

	if (ds_agent_state_path(state_dir, path, sizeof(path)) < 0) {
		ds_err_set(err, "state directory path too long: %s", state_dir);
		return -ENAMETOOLONG;
	}
	o = json_load_file(path, 0, &je);
	if (!o) {
		if (access(path, F_OK) != 0) {
			ds_err_set(err, "%s: %s", path, strerror(errno));
			return -ENOENT;
		}
		ds_err_set(err, "%s: %s", path, je.text);
		return -EBADMSG;
	}
	if (!json_is_object(o)) {
		json_decref(o);
		ds_err_set(err, "%s: not a JSON object", path);
		return -EBADMSG;
	}
	memset(st, 0, sizeof(*st));
	st->pid = get_int(o, "pid");
	copy_str(st->endpoint, sizeof(st->endpoint), o, "endpoint");
	st->connected = json_is_true(json_object_get(o, "connected"));
	st->since_ms = get_int(o, "sinceMs");
	st->started_ms = get_int(o, "startedMs");
	copy_str(st->last_event, sizeof(st->last_event), o, "lastEvent");
	copy_str(st->last_detail, sizeof(st->last_detail), o, "lastDetail");
	copy_str(st->schedule, sizeof(st->schedule), o, "schedule");
	st->next_pass_ms = get_int(o, "nextPassMs");
	st->bandwidth = (uint64_t)get_int(o, "bandwidth");
	copy_str(st->proxy, sizeof(st->proxy), o, "proxy");
	{
		const json_t *w = json_object_get(o, "wire");
		st->wire.sent = (uint64_t)get_int(w, "sent");
		st->wire.received = (uint64_t)get_int(w, "received");
		st->wire.json = (uint64_t)get_int(w, "json");
		st->wire.session_sent = (uint64_t)get_int(w, "sessionSent");
		st->wire.session_received = (uint64_t)get_int(w, "sessionReceived");
		st->wire.session_json = (uint64_t)get_int(w, "sessionJson");
		st->wire.zbatch = json_is_true(json_object_get(w, "zbatch"));
	}
	json_decref(o);
	if (running)
		*running = st->pid > 0 && (kill((pid_t)st->pid, 0) == 0 || errno == EPERM);
	return 0;
}
