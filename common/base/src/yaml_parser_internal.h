#ifndef DRASYNC_YAML_PARSER_INTERNAL_H
#define DRASYNC_YAML_PARSER_INTERNAL_H

/*
 * What the parts of the YAML parser share: yaml_parser.c (events, anchors,
 * sequences, aliases, nodes, the stream, the entry points), yaml_mapping.c
 * (scalars, keys, mappings, merge keys) and yaml_locs.c (the locations).
 */

#include "drasync/err.h"
#include "drasync/yaml.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <yaml.h>

struct loc_entry {
	size_t doc;
	size_t off, len; /* the JSON pointer, in locs->arena */
	ds_yaml_loc loc;
};

struct loc_slot {
	size_t idx; /* entry index + 1, 0 = empty */
	uint64_t hash;
};

struct ds_yaml_locs {
	char *file;
	struct loc_entry *v;
	size_t n, cap;
	char *arena;
	size_t alen, acap;
	struct loc_slot *slots; /* open-addressing index */
	size_t nslots;		/* power of two */
};

struct anchor {
	char *name;
	json_t *value; /* NULL while the anchored node is being parsed */
	size_t nodes;  /* nodes in value, the cost of one alias */
	int height;
	size_t loc_first, loc_end; /* its location entries */
	size_t prefix_len;	   /* length of its JSON pointer */
};

struct ps {
	yaml_parser_t p;
	const char *buf;
	size_t len;
	const char *file;
	ds_err *err;
	ds_yaml_locs *locs; /* NULL: record nothing */
	size_t doc;
	struct anchor *anchors;
	size_t nanchors, capanchors;
	size_t nodes;	    /* nodes read from the text */
	size_t alias_nodes; /* nodes added by aliases */
	char *ptr;	    /* current JSON pointer (with locations) */
	size_t ptrlen, ptrcap;
};

/* A node under construction: value plus bookkeeping for anchors and aliases. */
struct built {
	json_t *v;
	size_t nodes;
	int height;
};

/* Add an entry for the JSON pointer p1 followed by p2 in document doc. @return 0, -ENOMEM */
int ds_yaml_locs_add(ds_yaml_locs *locs, size_t doc, const char *p1, size_t l1, const char *p2,
		     size_t l2, const ds_yaml_loc *loc);

/* Index the entries; a later entry for the same (doc, pointer) wins. @return 0, -ENOMEM */
int ds_yaml_locs_index(ds_yaml_locs *locs);

/* Set ps->err at mark m (NULL: no position). @return rc */
int ds_yaml_fail(struct ps *ps, const yaml_mark_t *m, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The next event into *ev. @return 0 or the parser's error (ps->err set) */
int ds_yaml_next(struct ps *ps, yaml_event_t *ev);

/* Append "/" and seg (escaped) to the current JSON pointer. @return 0, -ENOMEM */
int ds_yaml_ptr_push(struct ps *ps, const char *seg, size_t len);

/* The latest anchor of that name, or NULL. */
struct anchor *ds_yaml_anchor_find(struct ps *ps, const char *name);

/* Build the value of the node that starts with *ev (consumed). */
int ds_yaml_parse_node(struct ps *ps, yaml_event_t *ev, int depth, const yaml_mark_t *keymark,
		       struct built *out);

/* A scalar node. */
int ds_yaml_parse_scalar(struct ps *ps, yaml_event_t *ev, struct built *out);

/* A mapping, entry by entry: a merge ("<<"), or a key checked and its value set. */
int ds_yaml_parse_mapping(struct ps *ps, int depth, struct built *out);

#endif
