#ifndef DRASYNC_CONFIG_CHECK_H
#define DRASYNC_CONFIG_CHECK_H

/*
 * The checks both agents' configuration files share (TargetConfig,
 * SourceConfig): a walk over the parsed document that knows the JSON pointer
 * and the user-facing dotted path ("dra.resourceClaimMappings[0].container")
 * of the node at hand, so every error says file:line:col and which key;
 * typed members; unknown keys rejected with a "did you mean" suggestion.
 */

#include "drasync/err.h"
#include "drasync/yaml.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#define DS_CONFIG_PATH_MAX 512
#define DS_CONFIG_API_VERSION "drasync.io/v1alpha1"

typedef struct ds_config_walk {
	const ds_yaml_locs *locs;
	const char *file;
	ds_err *err;
	const char *src; /* the file's text (for columns inside a value); may be NULL */
	size_t src_len;
	char ptr[DS_CONFIG_PATH_MAX];  /* JSON pointer of the node at hand */
	char path[DS_CONFIG_PATH_MAX]; /* the same as users read it */
} ds_config_walk;

/* Where push_key/push_index left the walk, to pop back to. */
typedef struct ds_config_mark {
	size_t ptr, path;
} ds_config_mark;

/** Descend into member `key` / element `i` of the node at hand. */
ds_config_mark ds_config_push_key(ds_config_walk *w, const char *key);
ds_config_mark ds_config_push_index(ds_config_walk *w, size_t i);
void ds_config_pop(ds_config_walk *w, ds_config_mark m);

/**
 * Record an error at the node at hand (at its key when at_key and it has
 * one), prefixed with its dotted path.
 * @return -EINVAL
 */
int ds_config_fail(ds_config_walk *w, bool at_key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/**
 * As ds_config_fail() at the value, `offset` bytes (0-based) into the string
 * it holds: past the opening quote of a quoted scalar, and only when the value
 * is a one-line plain or quoted scalar without escapes (else at the value).
 * @return -EINVAL
 */
int ds_config_fail_in_value(ds_config_walk *w, size_t offset, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/** "a mapping", "a list", "a string", ... for messages. */
const char *ds_config_type_name(const json_t *v);

/** Every key of obj must be one of allowed (NULL-terminated). @return 0, -EINVAL */
int ds_config_check_keys(ds_config_walk *w, const json_t *obj, const char *const *allowed);

/**
 * Optional member of a given type (JSON_TRUE stands for either boolean):
 * 0 with *out NULL when absent or null; -EINVAL when of another type.
 */
int ds_config_member(ds_config_walk *w, const json_t *obj, const char *key, json_type type,
		     json_t **out);

/** ds_config_member() for a string (borrowed, NULL when absent). */
int ds_config_member_str(ds_config_walk *w, const json_t *obj, const char *key, const char **out);

/** ds_config_member() for a boolean, `dflt` when absent. */
int ds_config_member_bool(ds_config_walk *w, const json_t *obj, const char *key, bool dflt,
			  bool *out);

/**
 * ds_config_member() for an integer within [lo, hi] (`bounds` says them in the
 * error, e.g. "1 to 1024, default 64"); *out kept when absent.
 */
int ds_config_member_int_range(ds_config_walk *w, const json_t *obj, const char *key, long long lo,
			       long long hi, const char *bounds, long long *out);

/**
 * An optional mapping member `section` whose members are all strings, from
 * `keys` (NULL-terminated) into the matching *outs[i].
 */
int ds_config_section_str(ds_config_walk *w, const json_t *obj, const char *section,
			  const char *const *keys, const char **outs[]);

/**
 * The apiVersion (when set, it must be DS_CONFIG_API_VERSION) and kind (when
 * set, it must be `kind`; `program` names the reader in the message).
 */
int ds_config_check_header(ds_config_walk *w, const json_t *root, const char *kind,
			   const char *program);

/* Checks a document's root and fills the configuration `ctx`; 0 or -EINVAL (err set). */
typedef int (*ds_config_root_fn)(ds_config_walk *w, const json_t *root, void *ctx);

/**
 * Read a configuration file: the file at `path` ("-" is stdin) or, when path
 * is NULL, the text buf/len named `filename` in errors. It must hold exactly
 * one document of `kind`, whose root is handed to `fn` with a walk that knows
 * every position. On success *docs_out (a one-element array) holds the
 * document, which owns every string `fn` borrowed from it.
 * @return 0; -EINVAL (err located) on a syntax error, a count of documents
 *         other than one, or what fn returns; -ENOENT and other negative
 *         errnos when the file cannot be read; -ENOMEM, -E2BIG
 */
int ds_config_run(const char *path, const char *buf, size_t len, const char *filename,
		  const char *kind, ds_config_root_fn fn, void *ctx, json_t **docs_out,
		  ds_err *err);

/** Whether s is "host:port" with a port of 1-65535 (host may be empty, a name, or [v6]). */
bool ds_config_host_port_valid(const char *s);

#endif
