#ifndef DRASYNC_YAML_H
#define DRASYNC_YAML_H

/*
 * YAML <-> JSON (jansson) for manifests and configuration files.
 *
 * Reading follows what kubectl accepts: a multi-document stream ("---"), or a
 * JSON text (JSON is YAML); plain scalars are typed as sigs.k8s.io/yaml types
 * them (null, booleans incl. yes/no/on/off/y/n, integers incl. 0x/0o/0b/leading-0
 * octal and "_", floats), quoted and block scalars stay strings, mapping key
 * order is kept, non-string keys become their string form ("1", "true"),
 * anchors/aliases are resolved (copied; bounded against alias bombs), merge
 * keys "<<" are applied. Errors carry file:line:col. Stricter than kubectl:
 * duplicate keys, .inf/.nan values (JSON cannot hold them) and keys containing
 * NUL are errors. Integers beyond int64 become floats (as the API server would
 * store them). Details: docs/yaml.md.
 * `kind: List` is not unrolled here (see manifest.h).
 */

#include "drasync/err.h"

#include <jansson.h>
#include <stdio.h>

/* A source position: 1-based line and column. */
typedef struct ds_yaml_loc {
	int line, col; /* where the value starts */
	int key_line,
	    key_col; /* where its mapping key starts (0 for documents and sequence items) */
} ds_yaml_loc;

/* Positions of every node of a parsed stream, looked up by document index and JSON pointer. */
typedef struct ds_yaml_locs ds_yaml_locs;

enum ds_yaml_flags {
	DS_YAML_LOCATIONS = 1u << 0, /* record positions (for configuration files) */
};

/* Upper bounds, so a hostile input cannot exhaust memory or the stack. */
#define DS_YAML_MAX_DEPTH 256
#define DS_YAML_MAX_INPUT (256u * 1024u * 1024u)

/**
 * Parse a YAML or JSON stream. Empty documents (only comments, a bare "---",
 * or a null root) are skipped, as kubectl skips them; document indexes (for
 * ds_yaml_locs_find) count only the documents kept.
 * @param filename  used in error messages ("-" for stdin)
 * @param docs_out  on success, a new JSON array with one element per document
 * @param locs_out  with DS_YAML_LOCATIONS, the positions (caller frees); may be NULL
 * @return 0, -EBADMSG on a syntax or type error (err located), -E2BIG, -ENOMEM
 */
int ds_yaml_parse(const char *buf, size_t len, const char *filename, unsigned flags,
		  json_t **docs_out, ds_yaml_locs **locs_out, ds_err *err);

/**
 * Read a whole file (or stdin for "-", at most DS_YAML_MAX_INPUT bytes) into
 * a new NUL-terminated buffer (caller frees); err names the file on failure.
 * @return 0, -errno of the open, -E2BIG, -EIO, -ENOMEM
 */
int ds_yaml_read_file(const char *path, char **out, size_t *len_out, ds_err *err);

/** Read a whole file (or stdin for "-") and parse it as ds_yaml_parse() does. */
int ds_yaml_parse_file(const char *path, unsigned flags, json_t **docs_out, ds_yaml_locs **locs_out,
		       ds_err *err);

/**
 * Position of the node at JSON pointer `ptr` (RFC 6901, "" for the document
 * root, "/dra/resourceClaimMappings/0/objectType") in document `doc`.
 * @return 0, or -ENOENT when unknown
 */
int ds_yaml_locs_find(const ds_yaml_locs *locs, size_t doc, const char *ptr, ds_yaml_loc *out);

/** The file name given to the parser. */
const char *ds_yaml_locs_file(const ds_yaml_locs *locs);

void ds_yaml_locs_free(ds_yaml_locs *locs);

/**
 * Write one JSON value as a YAML document (block style, keys in object order,
 * strings quoted whenever a plain scalar would be read back as another type or
 * would not be valid), so that ds_yaml_parse() of the output gives an equal value.
 * Does not write the "---" separator. Nothing is written on failure.
 * @return 0, -EIO, -ENOMEM, -EINVAL (nested deeper than DS_YAML_MAX_DEPTH),
 *         -E2BIG (the document would be longer than DS_YAML_MAX_INPUT)
 */
int ds_yaml_emit(FILE *out, const json_t *value, ds_err *err);

/** As ds_yaml_emit(), into a new NUL-terminated string (caller frees). */
int ds_yaml_emit_string(const json_t *value, char **out, ds_err *err);

#endif
