#include "drasync/dra_mapping.h"

#include "drasync/buf.h"
#include "drasync/k8s_object.h"
#include "drasync/kinds.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME_MAX_LEN 64 /* DNS label + NUL */

static const char *const ref_field[DS_TARGET_KIND_MAX] = {
    "resourceClaimName",
    "resourceClaimTemplateName",
};

/*
 * An entry of a group's resourceClaims (PodGroup spec.resourceClaims, a
 * Workload's podGroupTemplates[].resourceClaims, Job spec.scheduling
 * .resourceClaims) and what the rules make of it. A pod's entry shares the
 * group's claim only when name, resourceClaimName and
 * resourceClaimTemplateName are all equal.
 */
struct gentry {
	json_t *json;
	const char *name;
	enum ds_target_kind kind;
	const char *source;
	const ds_dra_rule *rule; /* NULL: kept */
	enum ds_target_kind tkind;
	const char *target;
	const char *by; /* what decided it, for messages: "container c" or the group */
};

/* A pod-level spec.resourceClaims entry. */
struct entry {
	json_t *json;
	const char *name;
	enum ds_target_kind kind; /* what it references now */
	const char *source;	  /* the claim or template it references now */
	size_t index;
	int listed;	       /* some container lists it */
	struct gentry *shared; /* the group entry whose claim it shares, or NULL */
};

/* One claim reference: container (NULL = ALL) x entry, and what it resolves to. */
struct ref {
	json_t *container; /* NULL for an entry no container lists */
	const char *cname;
	json_t *claim_item; /* the container's resources.claims[] item */
	struct entry *e;
	const ds_dra_rule *winner;
	enum ds_target_kind kind; /* effective target */
	const char *target;
	const char *new_name; /* entry name the container must use afterwards */
	bool init;	      /* an init container */
};

struct attach {
	json_t *container;
	const char *cname;
	const ds_dra_rule *rule;
};

/* Names in use in spec.resourceClaims; generated ones are owned. */
struct names {
	const char **v;
	char **owned;
	size_t n, n_owned, cap, cap_owned;
};

int ds_dra_rule_specificity(const ds_dra_rule *rule)
{
	return (rule->instance ? 8 : 0) + (rule->container ? 4 : 0) + (rule->source ? 2 : 0) +
	       (rule->object_type >= 0 ? 1 : 0);
}

static int matches(const ds_dra_rule *r, int workload, const char *instance, const char *container,
		   const char *entry, const char *source)
{
	if (r->object_type >= 0 && r->object_type != workload)
		return 0;
	if (r->instance && (!instance || strcmp(r->instance, instance) != 0))
		return 0;
	if (r->container && (!container || strcmp(r->container, container) != 0))
		return 0;
	if (r->source && !((entry && strcmp(r->source, entry) == 0) ||
			   (source && strcmp(r->source, source) == 0)))
		return 0;
	return 1;
}

static int same_target(const ds_dra_rule *a, const ds_dra_rule *b)
{
	return a->target_kind == b->target_kind && strcmp(a->target, b->target) == 0;
}

static void describe_tie(const ds_dra_rule *a, const ds_dra_rule *b, ds_err *err)
{
	ds_err_set(err,
		   "dra.%s[%zu] (-> %s %s) and dra.%s[%zu] (-> %s %s) match with the same "
		   "specificity %d; make one of them more specific",
		   a->list, a->index, ref_field[a->target_kind], a->target, b->list, b->index,
		   ref_field[b->target_kind], b->target, ds_dra_rule_specificity(a));
}

/* Pick the winner among rules that match; `want_attach` limits to attach rules. */
static int pick(const ds_dra_config *dra, int workload, const char *instance, const char *container,
		const char *entry, const char *source, int has_current, enum ds_target_kind current,
		int want_attach, const ds_dra_rule **winner, ds_err *err)
{
	const ds_dra_rule *best = NULL;
	int best_score = -1;

	/* Pass 1: the best specificity. */
	for (size_t i = 0; i < dra->n_rules; i++) {
		const ds_dra_rule *r = &dra->rules[i];
		int s;

		if ((want_attach && !r->attach) ||
		    !matches(r, workload, instance, container, entry, source))
			continue;
		s = ds_dra_rule_specificity(r);
		if (s > best_score) {
			best_score = s;
			best = r;
		}
	}
	if (!best) {
		*winner = NULL;
		return 0;
	}
	/*
	 * Pass 2: every rule at that specificity must agree. A claim rule and a
	 * template rule may tie: then the rules of E's own kind decide (round 1).
	 */
	const ds_dra_rule *tie_a = NULL, *tie_b = NULL;

	for (int round = 0; round < 2; round++) {
		const ds_dra_rule *first = NULL, *clash = NULL;

		for (size_t i = 0; i < dra->n_rules; i++) {
			const ds_dra_rule *r = &dra->rules[i];

			if ((want_attach && !r->attach) ||
			    ds_dra_rule_specificity(r) != best_score ||
			    !matches(r, workload, instance, container, entry, source))
				continue;
			if (round == 1 && r->target_kind != current)
				continue;
			if (!first)
				first = r;
			else if (!clash && !same_target(first, r))
				clash = r;
		}
		if (first && !clash) {
			*winner = first;
			return 0;
		}
		if (!tie_a) {
			tie_a = first;
			tie_b = clash;
		}
		if (round == 1 && first && clash) {
			tie_a = first;
			tie_b = clash;
		}
		if (!has_current)
			break;
	}
	describe_tie(tie_a, tie_b, err);
	return -EINVAL;
}

int ds_dra_resolve(const ds_dra_config *dra, int workload, const char *instance,
		   const char *container, const char *entry, const char *source,
		   enum ds_target_kind current, const ds_dra_rule **winner, ds_err *err)
{
	return ds_err_fallback(err, pick(dra, workload, instance, container, entry, source, 1,
					 current, 0, winner, err));
}

static int names_has(const struct names *ns, const char *name)
{
	for (size_t i = 0; i < ns->n; i++)
		if (strcmp(ns->v[i], name) == 0)
			return 1;
	return 0;
}

static int names_add(struct names *ns, const char *name, int owned)
{
	if (ds_grow((void **)&ns->v, &ns->cap, ns->n + 1, sizeof(*ns->v)) < 0)
		return -ENOMEM;
	if (owned) {
		if (ds_grow((void **)&ns->owned, &ns->cap_owned, ns->n_owned + 1,
			    sizeof(*ns->owned)) < 0)
			return -ENOMEM;
		ns->owned[ns->n_owned++] = (char *)(uintptr_t)name;
	}
	ns->v[ns->n++] = name;
	return 0;
}

static void names_dispose(struct names *ns)
{
	for (size_t i = 0; i < ns->n_owned; i++)
		free(ns->owned[i]);
	free(ns->owned);
	free(ns->v);
}

static uint32_t fnv1a(const char *s)
{
	uint32_t h = 2166136261u;

	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 16777619u;
	}
	return h;
}

/*
 * A new, unique, DNS-label entry name from `base` (and `suffix`): lower case,
 * other characters folded to '-', long names shortened with a hash of the
 * whole so that two long targets never collide, then -2, -3... on a clash.
 */
static int unique_name(struct names *ns, const char *base, const char *suffix, char **out)
{
	char full[600], label[NAME_MAX_LEN], cand[NAME_MAX_LEN + 8];
	size_t n = 0;
	char *dup;

	snprintf(full, sizeof(full), "%s%s%s", base, suffix ? "-" : "", suffix ? suffix : "");
	for (const char *p = full; *p && n < sizeof(full) - 1; p++) {
		char c = *p;

		if (c >= 'A' && c <= 'Z')
			c = (char)(c - 'A' + 'a');
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')))
			c = '-';
		if (c == '-' && (n == 0 || full[n - 1] == '-'))
			continue; /* no leading or doubled dashes */
		full[n++] = c;
	}
	while (n > 0 && full[n - 1] == '-')
		n--;
	full[n] = '\0';
	if (n == 0)
		snprintf(full, sizeof(full), "claim");
	if (strlen(full) > 63) {
		size_t keep = 54;
		while (keep > 0 && full[keep - 1] == '-')
			keep--;
		snprintf(label, sizeof(label), "%.*s-%08x", (int)keep, full, fnv1a(full));
	} else {
		memcpy(label, full, strlen(full) + 1);
	}
	snprintf(cand, sizeof(cand), "%s", label);
	for (unsigned i = 2; names_has(ns, cand); i++) {
		char sfx[12];
		size_t sl = (size_t)snprintf(sfx, sizeof(sfx), "-%u", i);
		size_t keep = strlen(label);

		if (keep + sl > 63)
			keep = 63 - sl;
		while (keep > 0 && label[keep - 1] == '-')
			keep--;
		snprintf(cand, sizeof(cand), "%.*s%s", (int)keep, label, sfx);
	}
	dup = strdup(cand);
	if (!dup || names_add(ns, dup, 1) < 0) {
		free(dup);
		return -ENOMEM;
	}
	*out = dup;
	return 0;
}

static void ref_text(enum ds_target_kind kind, const char *name, char *buf, size_t size)
{
	snprintf(buf, size, "%s=%s", ref_field[kind], name);
}

static json_t *new_entry_json(const char *name, enum ds_target_kind kind, const char *target)
{
	json_t *e = json_object();

	if (!e || json_object_set_new(e, "name", json_string(name)) < 0 ||
	    json_object_set_new(e, ref_field[kind], json_string(target)) < 0) {
		json_decref(e);
		return NULL;
	}
	return e;
}

/* Point an entry at (kind, target), removing the other reference field. */
static int retarget(json_t *entry, enum ds_target_kind kind, const char *target)
{
	json_object_del(entry,
			ref_field[kind == DS_TARGET_CLAIM ? DS_TARGET_TEMPLATE : DS_TARGET_CLAIM]);
	return json_object_set_new(entry, ref_field[kind], json_string(target)) < 0 ? -ENOMEM : 0;
}

struct ctx {
	const ds_dra_config *dra;
	ds_report *rep;
	char what[300]; /* "Deployment ns/name" */
	int workload;
	const char *instance;
	json_t *spec;
	struct entry *entries;
	size_t n_entries;
	struct ref *refs;
	size_t n_refs, cap_refs;
	struct attach *attaches;
	size_t n_attaches, cap_attaches;
	struct names names;
	size_t changed;
	char why[512]; /* the failure, reported once the attempt is abandoned */
	/* The group whose claims the pods may share: a PodGroup (another object,
	 * firm: its decision stands) or the Job's own spec.scheduling (its entries
	 * are rewritten with the pod spec's). */
	struct gentry *g;
	size_t n_g;
	bool g_firm;
	char g_what[340];
	const char *g_name;
	json_t *g_rcs;	 /* the Job's copy of spec.scheduling.resourceClaims */
	bool g_conflict; /* the failure is a group and a member that disagree */
};

static int fail(struct ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int fail(struct ctx *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->why, sizeof(c->why), fmt, ap);
	va_end(ap);
	return -EINVAL;
}

static int add_ref(struct ctx *c, json_t *container, const char *cname, json_t *item,
		   struct entry *e)
{
	if (ds_grow((void **)&c->refs, &c->cap_refs, c->n_refs + 1, sizeof(*c->refs)) < 0)
		return -ENOMEM;
	c->refs[c->n_refs++] =
	    (struct ref){.container = container, .cname = cname, .claim_item = item, .e = e};
	return 0;
}

static int collect_entries(struct ctx *c)
{
	json_t *rcs = json_object_get(c->spec, "resourceClaims");
	size_t i;
	json_t *v;

	if (!rcs || json_is_null(rcs))
		return 0;
	if (!json_is_array(rcs))
		return fail(c, "spec.resourceClaims is not a list");
	c->entries = calloc(json_array_size(rcs) + 1, sizeof(*c->entries));
	if (!c->entries)
		return -ENOMEM;
	json_array_foreach (rcs, i, v) {
		struct entry *e = &c->entries[c->n_entries];
		const char *claim = ds_json_str(v, "resourceClaimName");
		const char *tmpl = ds_json_str(v, "resourceClaimTemplateName");

		e->json = v;
		e->index = i;
		e->name = ds_json_str(v, "name");
		if (!e->name)
			return fail(c, "spec.resourceClaims[%zu] has no name", i);
		if ((claim && tmpl) || (!claim && !tmpl))
			return fail(c,
				    "spec.resourceClaims[%zu] (%s) must set exactly one of "
				    "resourceClaimName and resourceClaimTemplateName",
				    i, e->name);
		e->kind = claim ? DS_TARGET_CLAIM : DS_TARGET_TEMPLATE;
		e->source = claim ? claim : tmpl;
		if (names_has(&c->names, e->name))
			return fail(c, "spec.resourceClaims has two entries named %s", e->name);
		if (names_add(&c->names, e->name, 0) < 0)
			return -ENOMEM;
		c->n_entries++;
	}
	return 0;
}

static struct entry *find_entry(struct ctx *c, const char *name)
{
	for (size_t i = 0; name && i < c->n_entries; i++)
		if (strcmp(c->entries[i].name, name) == 0)
			return &c->entries[i];
	return NULL;
}

/* Claim references of every init container and container, in pod-spec order. */
static int collect_refs(struct ctx *c)
{
	static const char *const lists[] = {"initContainers", "containers"};
	int r;

	for (size_t l = 0; l < 2; l++) {
		json_t *arr = json_object_get(c->spec, lists[l]);
		size_t i;
		json_t *ctr;

		if (!json_is_array(arr))
			continue;
		json_array_foreach (arr, i, ctr) {
			const char *cname = ds_json_str(ctr, "name");
			json_t *claims = ds_json_path(ctr, "resources.claims");
			size_t k;
			json_t *item;

			if (!cname)
				return fail(c, "%s[%zu] has no name", lists[l], i);
			if (!json_is_array(claims) || json_array_size(claims) == 0) {
				/* Candidate for attach: decided later. */
				if (ds_grow((void **)&c->attaches, &c->cap_attaches,
					    c->n_attaches + 1, sizeof(*c->attaches)) < 0)
					return -ENOMEM;
				c->attaches[c->n_attaches++] =
				    (struct attach){.container = ctr, .cname = cname};
				continue;
			}
			json_array_foreach (claims, k, item) {
				const char *en = ds_json_str(item, "name");
				struct entry *e = find_entry(c, en);

				if (!e)
					return fail(c,
						    "container %s uses claim '%s', which "
						    "spec.resourceClaims does not define",
						    cname, en ? en : "(no name)");
				e->listed = 1;
				if ((r = add_ref(c, ctr, cname, item, e)) < 0)
					return r;
				c->refs[c->n_refs - 1].init = l == 0;
			}
		}
	}
	for (size_t i = 0; i < c->n_entries; i++)
		if (!c->entries[i].listed && (r = add_ref(c, NULL, NULL, NULL, &c->entries[i])) < 0)
			return r;
	return 0;
}

static bool is_init(const json_t *spec, const json_t *container)
{
	json_t *inits = json_object_get(spec, "initContainers");
	size_t i;
	json_t *v;

	json_array_foreach (inits, i, v)
		if (v == container)
			return true;
	return false;
}

static void rule_text(const ds_dra_rule *r, char *buf, size_t size)
{
	if (r)
		snprintf(buf, size, "rule dra.%s[%zu] (line %d)", r->list, r->index, r->line);
	else
		snprintf(buf, size, "no rule");
}

/*
 * Read a group's resourceClaims list (NULL or absent: none). `path` names it
 * in messages. *out is a new array (free()) of *n.
 * @return 0, -EINVAL (why says which entry), -ENOMEM
 */
static int read_group(json_t *rcs, const char *path, struct gentry **out, size_t *n, char *why,
		      size_t why_size)
{
	struct gentry *v;
	size_t i, k = 0;
	json_t *e;

	*out = NULL;
	*n = 0;
	if (!rcs || json_is_null(rcs))
		return 0;
	if (!json_is_array(rcs)) {
		snprintf(why, why_size, "%s is not a list", path);
		return -EINVAL;
	}
	v = calloc(json_array_size(rcs) + 1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	json_array_foreach (rcs, i, e) {
		const char *claim = ds_json_str(e, "resourceClaimName");
		const char *tmpl = ds_json_str(e, "resourceClaimTemplateName");
		struct gentry *g = &v[k];

		g->json = e;
		g->name = ds_json_str(e, "name");
		if (!g->name || (claim && tmpl) || (!claim && !tmpl)) {
			snprintf(why, why_size,
				 "%s[%zu] needs a name and exactly one of resourceClaimName and "
				 "resourceClaimTemplateName",
				 path, i);
			free(v);
			return -EINVAL;
		}
		for (size_t j = 0; j < k; j++)
			if (strcmp(v[j].name, g->name) == 0) {
				snprintf(why, why_size, "%s has two entries named %s", path,
					 g->name);
				free(v);
				return -EINVAL;
			}
		g->kind = g->tkind = claim ? DS_TARGET_CLAIM : DS_TARGET_TEMPLATE;
		g->source = g->target = claim ? claim : tmpl;
		k++;
	}
	*out = v;
	*n = k;
	return 0;
}

/*
 * What the rules that name the group (objectType PodGroup, Workload, or the
 * Job; container ALL) make of each of its entries.
 * @return 0, -EINVAL (a tie: why names the two rules)
 */
static int decide_group(const ds_dra_config *dra, int type, const char *instance, struct gentry *g,
			size_t n, const char *what, char *why, size_t why_size)
{
	for (size_t i = 0; i < n; i++) {
		const ds_dra_rule *w = NULL;
		ds_err e = {0};

		if (pick(dra, type, instance, NULL, g[i].name, g[i].source, 1, g[i].kind, 0, &w,
			 &e) < 0) {
			snprintf(why, why_size, "%.200s, claim %.100s: %.200s", what, g[i].name,
				 e.msg);
			return -EINVAL;
		}
		g[i].rule = w;
		g[i].tkind = w ? w->target_kind : g[i].kind;
		g[i].target = w ? w->target : g[i].source;
		g[i].by = what;
	}
	return 0;
}

static struct gentry *shared_entry(struct ctx *c, const struct entry *e)
{
	for (size_t i = 0; i < c->n_g; i++)
		if (strcmp(c->g[i].name, e->name) == 0 && c->g[i].kind == e->kind &&
		    strcmp(c->g[i].source, e->source) == 0)
			return &c->g[i];
	return NULL;
}

/*
 * Group and members agree: every reference to an entry that shares the
 * group's claim resolves to one target. For a PodGroup (firm) that is the
 * group's own decision, and a member rule that would map the entry elsewhere
 * is an error naming both rules. For a Job's spec.scheduling claims a rule
 * on any of the Job's references is done to the scheduling entry too, and
 * two that differ (a split of the shared claim) are an error.
 */
static int share(struct ctx *c)
{
	for (size_t i = 0; i < c->n_entries; i++) {
		struct entry *e = &c->entries[i];
		struct gentry *g = shared_entry(c, e);
		const ds_dra_rule *rule;
		enum ds_target_kind kind;
		const char *target, *by;
		bool decided;

		e->shared = g;
		if (!g)
			continue;
		decided = c->g_firm || g->rule;
		rule = g->rule;
		kind = g->tkind;
		target = g->target;
		by = g->by;
		for (size_t k = 0; k < c->n_refs; k++) {
			struct ref *rf = &c->refs[k];
			char a[120], b[120];

			if (rf->e != e || !rf->winner)
				continue;
			if (!decided) {
				decided = true;
				rule = rf->winner;
				kind = rf->kind;
				target = rf->target;
				by = rf->cname ? rf->cname : "ALL";
				continue;
			}
			if (rf->kind == kind && strcmp(rf->target, target) == 0)
				continue;
			rule_text(rf->winner, a, sizeof(a));
			rule_text(rule, b, sizeof(b));
			c->g_conflict = true;
			if (c->g_firm)
				return fail(c,
					    "claim %s shares %s's claim (%s=%s): %s maps it for "
					    "container %s to %s=%s, but %s gives the group %s=%s; "
					    "group and members must agree (name the group in the "
					    "rule: objectType: PodGroup, objectInstance: %s)",
					    e->name, c->g_what, ref_field[e->kind], e->source, a,
					    rf->cname ? rf->cname : "ALL", ref_field[rf->kind],
					    rf->target, b, ref_field[kind], target, c->g_name);
			return fail(c,
				    "claim %s is shared with spec.scheduling.resourceClaims: %s "
				    "maps it for container %s to %s=%s, %s for %s to %s=%s; a "
				    "shared claim cannot be split",
				    e->name, a, rf->cname ? rf->cname : "ALL", ref_field[rf->kind],
				    rf->target, b, by, ref_field[kind], target);
		}
		for (size_t k = 0; k < c->n_refs; k++) {
			struct ref *rf = &c->refs[k];

			if (rf->e != e)
				continue;
			rf->winner = rule;
			rf->kind = kind;
			rf->target = target;
		}
		g->rule = rule;
		g->tkind = kind;
		g->target = target;
	}
	return 0;
}

static int resolve_refs(struct ctx *c)
{
	ds_err why = {0};

	for (size_t i = 0; i < c->n_refs; i++) {
		struct ref *rf = &c->refs[i];
		const ds_dra_rule *w = NULL;

		if (pick(c->dra, c->workload, c->instance, rf->cname, rf->e->name, rf->e->source, 1,
			 rf->e->kind, 0, &w, &why) < 0)
			return fail(c, "container %s, claim %s: %s", rf->cname ? rf->cname : "ALL",
				    rf->e->name, why.msg);
		rf->winner = w;
		rf->kind = w ? w->target_kind : rf->e->kind;
		rf->target = w ? w->target : rf->e->source;
		rf->new_name = rf->e->name;
	}
	for (size_t i = 0; i < c->n_attaches; i++) {
		struct attach *a = &c->attaches[i];

		if (pick(c->dra, c->workload, c->instance, a->cname, NULL, NULL, 0, DS_TARGET_CLAIM,
			 1, &a->rule, &why) < 0)
			return fail(c, "container %s (attach): %s", a->cname, why.msg);
	}
	return c->n_g ? share(c) : 0;
}

int ds_dra_workload_refs(const ds_dra_config *dra, const json_t *obj, ds_dra_ref **out, size_t *n,
			 ds_err *err)
{
	return ds_dra_workload_refs_in(dra, obj, NULL, out, n, err);
}

/*
 * A reference to an entry that shares the group's claim resolves as the group
 * decides (see share()); a member rule that disagrees is that reference's error.
 */
static void shared_ref(ds_dra_ref *d, const struct gentry *g, const ds_dra_rule *own,
		       const char *gwhat)
{
	char a[120], b[120], msg[1200];
	size_t len;

	if (own && !(own->target_kind == g->tkind && strcmp(own->target, g->target) == 0)) {
		rule_text(own, a, sizeof(a));
		rule_text(g->rule, b, sizeof(b));
		snprintf(msg, sizeof(msg),
			 "shares %s's claim: %s maps it to %s=%s, %s gives the group %s=%s", gwhat,
			 a, ref_field[own->target_kind], own->target, b, ref_field[g->tkind],
			 g->target);
		/* cut to fit */
		len = strlen(msg) < sizeof(d->error) ? strlen(msg) : sizeof(d->error) - 1;
		memcpy(d->error, msg, len);
		d->error[len] = '\0';
		d->rule = NULL;
		return;
	}
	d->rule = g->rule;
	d->target_kind = g->tkind;
	d->target = g->target;
}

int ds_dra_workload_refs_in(const ds_dra_config *dra, const json_t *obj, const json_t *group,
			    ds_dra_ref **out, size_t *n, ds_err *err)
{
	struct ctx c = {.dra = dra};
	ds_dra_ref *v = NULL;
	size_t len = 0;
	enum ds_workload w;
	int r;

	/* Only reads: the walk below never writes into the pod spec. */
	c.spec = ds_obj_pod_spec(obj, &w);
	if (!c.spec) {
		*out = NULL;
		*n = 0;
		return 0;
	}
	c.workload = (int)w;
	c.instance = ds_obj_name(obj);
	if (group && w != DS_WORKLOAD_JOB && ds_json_path(group, "spec.resourceClaims")) {
		ds_obj_describe(group, c.g_what, sizeof(c.g_what));
		if ((r = read_group(ds_json_path(group, "spec.resourceClaims"),
				    "the group's spec.resourceClaims", &c.g, &c.n_g, c.why,
				    sizeof(c.why))) < 0 ||
		    (r = decide_group(dra, DS_RULE_PODGROUP, ds_obj_name(group), c.g, c.n_g,
				      c.g_what, c.why, sizeof(c.why))) < 0)
			goto out;
	}
	if ((r = collect_entries(&c)) < 0 || (r = collect_refs(&c)) < 0)
		goto out;
	v = calloc(c.n_refs + c.n_attaches + 1, sizeof(*v));
	if (!v) {
		r = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < c.n_refs; i++) {
		const struct ref *rf = &c.refs[i];
		ds_dra_ref *d = &v[len++];
		ds_err why = {0};

		d->container = rf->cname;
		d->init_container = rf->init;
		d->entry = rf->e->name;
		d->kind = d->target_kind = rf->e->kind;
		d->from = d->target = rf->e->source;
		if (pick(dra, c.workload, c.instance, rf->cname, rf->e->name, rf->e->source, 1,
			 rf->e->kind, 0, &d->rule, &why) < 0) {
			d->rule = NULL;
			snprintf(d->error, sizeof(d->error), "%s", why.msg);
		} else if (d->rule) {
			d->target_kind = d->rule->target_kind;
			d->target = d->rule->target;
		}
		if (!d->error[0] && shared_entry(&c, rf->e))
			shared_ref(d, shared_entry(&c, rf->e), d->rule, c.g_what);
	}
	for (size_t i = 0; i < c.n_attaches; i++) {
		const struct attach *a = &c.attaches[i];
		const ds_dra_rule *rule = NULL;
		ds_err why = {0};
		int p = pick(dra, c.workload, c.instance, a->cname, NULL, NULL, 0, DS_TARGET_CLAIM,
			     1, &rule, &why);
		ds_dra_ref *d;

		if (p == 0 && !rule)
			continue; /* no claim and no attach rule: not a reference */
		d = &v[len++];
		d->container = a->cname;
		d->init_container = is_init(c.spec, a->container);
		d->attach = true;
		if (p < 0) {
			snprintf(d->error, sizeof(d->error), "%s", why.msg);
			continue;
		}
		d->rule = rule;
		d->kind = d->target_kind = rule->target_kind;
		d->target = rule->target;
	}
	r = 0;
out:
	if (r < 0) {
		free(v);
		if (r == -EINVAL)
			ds_err_set(err, "%s", c.why);
	} else {
		*out = len ? v : NULL;
		*n = len;
		if (!len)
			free(v);
	}
	names_dispose(&c.names);
	free(c.g);
	free(c.entries);
	free(c.refs);
	free(c.attaches);
	return ds_err_fallback(err, r);
}

static int same_ref_target(const struct ref *a, const struct ref *b)
{
	return a->kind == b->kind && strcmp(a->target, b->target) == 0;
}

static void report_rewrite(struct ctx *c, const struct ref *rf, const char *entry_after)
{
	char from[300], to[300], msg[600];

	ref_text(rf->e->kind, rf->e->source, from, sizeof(from));
	ref_text(rf->kind, rf->target, to, sizeof(to));
	snprintf(msg, sizeof(msg), "(rule dra.%s[%zu]%s%s%s%s)", rf->winner->list,
		 rf->winner->index, strcmp(entry_after, rf->e->name) ? ", entry now " : "",
		 strcmp(entry_after, rf->e->name) ? entry_after : "",
		 rf->e->shared ? ", shared with " : "", rf->e->shared ? c->g_what : "");
	ds_report_add(c->rep, DS_REPORT_REWRITE, c->what, rf->cname ? rf->cname : "ALL",
		      rf->e->name, from, to, msg);
}

/*
 * Apply the decisions for one entry: a single target rewrites it in place;
 * several split it, the unchanged group (or else the first) keeping the name.
 */
static int apply_entry(struct ctx *c, struct entry *e, json_t *rcs, size_t *inserted)
{
	struct ref *groups[64];
	size_t n_groups = 0, keeper = SIZE_MAX;
	int r;

	for (size_t i = 0; i < c->n_refs; i++) {
		struct ref *rf = &c->refs[i];
		size_t g;

		if (rf->e != e)
			continue;
		for (g = 0; g < n_groups; g++)
			if (same_ref_target(groups[g], rf))
				break;
		if (g == n_groups) {
			if (n_groups == 64)
				return fail(c, "claim %s is used by too many containers", e->name);
			groups[n_groups++] = rf;
		}
	}
	if (n_groups == 0)
		return 0;
	for (size_t g = 0; g < n_groups; g++)
		if (groups[g]->kind == e->kind && strcmp(groups[g]->target, e->source) == 0)
			keeper = g;
	if (keeper == SIZE_MAX)
		keeper = 0;

	for (size_t g = 0; g < n_groups; g++) {
		struct ref *lead = groups[g];
		const char *name = e->name;

		if (g != keeper) {
			char *nn;
			json_t *ne;

			if ((r = unique_name(&c->names, e->name, lead->target, &nn)) < 0)
				return r;
			ne = new_entry_json(nn, lead->kind, lead->target);
			if (!ne || json_array_insert_new(rcs, e->index + 1 + *inserted, ne) < 0)
				return -ENOMEM;
			(*inserted)++;
			name = nn;
		}
		for (size_t i = 0; i < c->n_refs; i++) {
			struct ref *rf = &c->refs[i];

			if (rf->e != e || !same_ref_target(rf, lead))
				continue;
			rf->new_name = name;
			if (rf->claim_item && name != e->name &&
			    json_object_set_new(rf->claim_item, "name", json_string(name)) < 0)
				return -ENOMEM;
			if (rf->winner &&
			    !(rf->kind == e->kind && strcmp(rf->target, e->source) == 0)) {
				report_rewrite(c, rf, name);
				c->changed++;
			}
		}
	}
	if (n_groups > 1) {
		char names[400];
		size_t o = 0;

		for (size_t g = 0; g < n_groups; g++)
			for (size_t i = 0; i < c->n_refs; i++)
				if (c->refs[i].e == e && same_ref_target(&c->refs[i], groups[g])) {
					o += (size_t)snprintf(
					    names + o, o < sizeof(names) ? sizeof(names) - o : 0,
					    "%s%s", g ? ", " : "", c->refs[i].new_name);
					break;
				}
		ds_report_addf(c->rep, DS_REPORT_SPLIT, c->what,
			       "claim entry %s is shared by containers that map to different "
			       "targets: split into %s",
			       e->name, names);
	}
	/* Last: the kept entry takes its group's target (e->source is read above). */
	if (!(groups[keeper]->kind == e->kind && strcmp(groups[keeper]->target, e->source) == 0))
		return retarget(e->json, groups[keeper]->kind, groups[keeper]->target);
	return 0;
}

static int remove_extended(struct ctx *c, const struct attach *a)
{
	static const char *const maps[] = {"limits", "requests"};

	for (size_t k = 0; k < a->rule->n_extended_resources; k++) {
		const char *res = a->rule->extended_resources[k];

		for (size_t m = 0; m < 2; m++) {
			json_t *map =
			    ds_json_path(json_object_get(a->container, "resources"), maps[m]);
			json_t *v = json_object_get(map, res);
			char from[300], msg[200];

			if (!v)
				continue;
			if (json_is_string(v))
				snprintf(from, sizeof(from), "%s.%s=%s", maps[m], res,
					 json_string_value(v));
			else if (json_is_integer(v))
				snprintf(from, sizeof(from), "%s.%s=%lld", maps[m], res,
					 (long long)json_integer_value(v));
			else
				snprintf(from, sizeof(from), "%s.%s", maps[m], res);
			snprintf(msg, sizeof(msg), "(replaced by DRA, rule dra.%s[%zu])",
				 a->rule->list, a->rule->index);
			ds_report_add(c->rep, DS_REPORT_RESOURCE, c->what, a->cname, NULL, from,
				      "(removed)", msg);
			json_object_del(map, res);
			c->changed++;
		}
	}
	return 0;
}

static int apply_attach(struct ctx *c, const struct attach *a)
{
	json_t *rcs, *res, *claims, *item;
	const char *entry_name = NULL;
	char *nn = NULL;
	char to[300], msg[200];
	size_t i;
	json_t *v;
	int r;

	rcs = json_object_get(c->spec, "resourceClaims");
	if (!json_is_array(rcs)) {
		rcs = json_array();
		if (!rcs || json_object_set_new(c->spec, "resourceClaims", rcs) < 0)
			return -ENOMEM;
	}
	/* Reuse an entry that already points at the target. */
	json_array_foreach (rcs, i, v) {
		const char *t = ds_json_str(v, ref_field[a->rule->target_kind]);
		if (t && strcmp(t, a->rule->target) == 0) {
			entry_name = ds_json_str(v, "name");
			break;
		}
	}
	if (!entry_name) {
		json_t *ne;

		if ((r = unique_name(&c->names, a->rule->target, NULL, &nn)) < 0)
			return r;
		ne = new_entry_json(nn, a->rule->target_kind, a->rule->target);
		if (!ne || json_array_append_new(rcs, ne) < 0)
			return -ENOMEM;
		entry_name = nn;
	}
	res = ds_json_object_ensure(a->container, "resources");
	if (!res)
		return fail(c, "container %s: resources is not a mapping", a->cname);
	claims = json_object_get(res, "claims");
	if (!json_is_array(claims)) {
		claims = json_array();
		if (!claims || json_object_set_new(res, "claims", claims) < 0)
			return -ENOMEM;
	}
	item = json_object();
	if (!item || json_object_set_new(item, "name", json_string(entry_name)) < 0 ||
	    json_array_append_new(claims, item) < 0) {
		json_decref(item);
		return -ENOMEM;
	}
	ref_text(a->rule->target_kind, a->rule->target, to, sizeof(to));
	snprintf(msg, sizeof(msg), "(attach, rule dra.%s[%zu])", a->rule->list, a->rule->index);
	ds_report_add(c->rep, DS_REPORT_ATTACH, c->what, a->cname, entry_name, "(no claim)", to,
		      msg);
	c->changed++;
	return remove_extended(c, a);
}

/* The object whose "spec" is the pod spec (see ds_obj_pod_spec): where the mapped copy goes. */
static json_t *pod_spec_holder(json_t *obj, enum ds_workload w)
{
	switch (w) {
	case DS_WORKLOAD_POD:
		return obj;
	case DS_WORKLOAD_CRONJOB:
		return ds_json_path(obj, "spec.jobTemplate.spec.template");
	default:
		return ds_json_path(obj, "spec.template");
	}
}

/* Rewrite the entries of a group list as decided; report each change. */
static size_t apply_group(struct gentry *g, size_t n, const char *what, const char *path,
			  ds_report *rep, int *rc)
{
	size_t changed = 0;

	for (size_t i = 0; i < n && *rc == 0; i++) {
		char from[300], to[300], msg[200];

		if (!g[i].rule ||
		    (g[i].tkind == g[i].kind && strcmp(g[i].target, g[i].source) == 0))
			continue;
		ref_text(g[i].kind, g[i].source, from, sizeof(from));
		ref_text(g[i].tkind, g[i].target, to, sizeof(to));
		snprintf(msg, sizeof(msg), "(rule dra.%s[%zu], %s)", g[i].rule->list,
			 g[i].rule->index, path);
		if (ds_report_add(rep, DS_REPORT_REWRITE, what, "ALL", g[i].name, from, to, msg) <
			0 ||
		    retarget(g[i].json, g[i].tkind, g[i].target) < 0)
			*rc = -ENOMEM;
		changed++;
	}
	return changed;
}

static int map_workload(const ds_dra_config *dra, json_t *obj, const json_t *group, ds_report *rep,
			bool *conflict)
{
	struct ctx c = {.dra = dra, .rep = rep};
	size_t rep_start = ds_report_count(rep), inserted = 0;
	enum ds_workload w;
	json_t *spec, *rcs;
	int r;

	spec = ds_obj_pod_spec(obj, &w);
	if (!spec)
		return 0;
	c.workload = (int)w;
	c.instance = ds_obj_name(obj);
	ds_obj_describe(obj, c.what, sizeof(c.what));

	/*
	 * Decide everything first, then apply to a copy of the pod spec that
	 * replaces the original only when all of it succeeded: a failure found
	 * while applying (after earlier entries were rewritten) leaves obj as it was.
	 */
	c.spec = json_deep_copy(spec);
	if (!c.spec) {
		r = -ENOMEM;
		goto out;
	}
	if (w == DS_WORKLOAD_JOB && ds_json_path(obj, "spec.scheduling.resourceClaims")) {
		/* The Job is its own group: its pods share spec.scheduling's claims. */
		c.g_rcs = json_deep_copy(ds_json_path(obj, "spec.scheduling.resourceClaims"));
		snprintf(c.g_what, sizeof(c.g_what), "%s spec.scheduling", c.what);
		c.g_name = c.instance;
		if (!c.g_rcs) {
			r = -ENOMEM;
			goto out;
		}
		if ((r = read_group(c.g_rcs, "spec.scheduling.resourceClaims", &c.g, &c.n_g, c.why,
				    sizeof(c.why))) < 0 ||
		    (r = decide_group(dra, c.workload, c.instance, c.g, c.n_g, "spec.scheduling",
				      c.why, sizeof(c.why))) < 0)
			goto out;
	} else if (group && ds_json_path(group, "spec.resourceClaims")) {
		char gwhat[340];

		c.g_firm = true;
		c.g_name = ds_obj_name(group);
		ds_obj_describe(group, c.g_what, sizeof(c.g_what));
		snprintf(gwhat, sizeof(gwhat), "%s", c.g_what);
		if ((r = read_group(ds_json_path(group, "spec.resourceClaims"),
				    "the group's spec.resourceClaims", &c.g, &c.n_g, c.why,
				    sizeof(c.why))) < 0 ||
		    (r = decide_group(dra, DS_RULE_PODGROUP, c.g_name, c.g, c.n_g, gwhat, c.why,
				      sizeof(c.why))) < 0)
			goto out;
	}
	if ((r = collect_entries(&c)) < 0 || (r = collect_refs(&c)) < 0 ||
	    (r = resolve_refs(&c)) < 0)
		goto out;
	rcs = json_object_get(c.spec, "resourceClaims");
	for (size_t i = 0; i < c.n_entries; i++)
		if ((r = apply_entry(&c, &c.entries[i], rcs, &inserted)) < 0)
			goto out;
	for (size_t i = 0; i < c.n_attaches; i++)
		if (c.attaches[i].rule && (r = apply_attach(&c, &c.attaches[i])) < 0)
			goto out;
	if (c.g_rcs) {
		size_t n =
		    apply_group(c.g, c.n_g, c.what, "spec.scheduling.resourceClaims", rep, &r);
		if (r < 0)
			goto out;
		if (n && json_object_set(ds_json_path(obj, "spec.scheduling"), "resourceClaims",
					 c.g_rcs) < 0) {
			r = -ENOMEM;
			goto out;
		}
		c.changed += n;
	}
	/* "spec" exists in its holder: replacing the value allocates nothing */
	if (c.changed > 0 && json_object_set(pod_spec_holder(obj, w), "spec", c.spec) < 0) {
		r = -ENOMEM;
		goto out;
	}
	r = (int)c.changed;
out:
	if (r < 0) {
		/* nothing was done: only the error is reported */
		ds_report_truncate(rep, rep_start);
		ds_report_add(rep, DS_REPORT_ERROR, c.what, NULL, NULL, NULL, NULL,
			      r == -ENOMEM ? "out of memory"
			      : c.why[0]   ? c.why
					   : strerror(-r));
	}
	if (conflict)
		*conflict = c.g_conflict;
	json_decref(c.spec);
	json_decref(c.g_rcs);
	free(c.g);
	names_dispose(&c.names);
	free(c.entries);
	free(c.refs);
	free(c.attaches);
	return r;
}

int ds_dra_map_workload_in(const ds_dra_config *dra, json_t *obj, const json_t *group,
			   ds_report *rep)
{
	return map_workload(dra, obj, group, rep, NULL);
}

int ds_dra_map_workload(const ds_dra_config *dra, json_t *obj, ds_report *rep)
{
	return map_workload(dra, obj, NULL, rep, NULL);
}

int ds_dra_check_group(const ds_dra_config *dra, const json_t *group, const json_t *members,
		       char *why, size_t size)
{
	ds_report *rep = NULL;
	size_t i;
	json_t *m;
	int r = ds_report_new(&rep);

	if (r < 0)
		return r;
	json_array_foreach (members, i, m) {
		json_t *copy = json_deep_copy(m);
		bool conflict = false;

		if (!copy) {
			r = -ENOMEM;
			break;
		}
		r = map_workload(dra, copy, group, rep, &conflict);
		json_decref(copy);
		if (r == -ENOMEM)
			break;
		if (r == -EINVAL && conflict) {
			const ds_report_entry *e = ds_report_get(rep, ds_report_count(rep) - 1);
			snprintf(why, size, "%s: %s", e->object, e->message);
			break;
		}
		r = 0;
	}
	ds_report_free(rep);
	return r;
}

const char *ds_dra_group_of(const json_t *obj)
{
	return ds_json_str(ds_json_path(ds_obj_pod_spec(obj, NULL), "schedulingGroup"),
			   "podGroupName");
}

int ds_dra_map_group(const ds_dra_config *dra, json_t *obj, ds_report *rep)
{
	const char *kind = ds_obj_kind(obj);
	size_t rep_start = ds_report_count(rep), changed = 0;
	bool podgroup;
	json_t *copy = NULL, *tpls, *t;
	struct gentry *g = NULL;
	char what[300], why[512] = "", path[80];
	size_t n = 0, i;
	int r = 0;

	if (!kind || !ds_obj_in_group(obj, "scheduling.k8s.io") || !ds_kind_is_group(kind))
		return 0;
	podgroup = ds_kind_is(kind, DS_KIND_POD_GROUP);
	ds_obj_describe(obj, what, sizeof(what));
	/* On a copy of the spec: it replaces the original only when all of it succeeded. */
	copy = json_deep_copy(json_object_get(obj, "spec"));
	if (!copy)
		return json_object_get(obj, "spec") ? -ENOMEM : 0;
	if (podgroup) {
		if ((r = read_group(json_object_get(copy, "resourceClaims"), "spec.resourceClaims",
				    &g, &n, why, sizeof(why))) < 0 ||
		    (r = decide_group(dra, DS_RULE_PODGROUP, ds_obj_name(obj), g, n, what, why,
				      sizeof(why))) < 0)
			goto out;
		changed += apply_group(g, n, what, "spec.resourceClaims", rep, &r);
		goto out;
	}
	/* A Workload: the claims of each PodGroup template; PodGroups made from one share them. */
	tpls = json_object_get(copy, "podGroupTemplates");
	json_array_foreach (tpls, i, t) {
		const char *tn = ds_json_str(t, "name");

		snprintf(path, sizeof(path), "spec.podGroupTemplates[%zu].resourceClaims", i);
		free(g);
		g = NULL;
		if ((r = read_group(json_object_get(t, "resourceClaims"), path, &g, &n, why,
				    sizeof(why))) < 0 ||
		    (r = decide_group(dra, DS_RULE_WORKLOAD, ds_obj_name(obj), g, n, what, why,
				      sizeof(why))) < 0)
			goto out;
		snprintf(path, sizeof(path), "podGroupTemplates %s", tn ? tn : "?");
		changed += apply_group(g, n, what, path, rep, &r);
		if (r < 0)
			goto out;
	}
out:
	if (r == 0 && changed && json_object_set(obj, "spec", copy) < 0)
		r = -ENOMEM;
	if (r < 0) {
		ds_report_truncate(rep, rep_start);
		ds_report_add(rep, DS_REPORT_ERROR, what, NULL, NULL, NULL, NULL,
			      r == -ENOMEM ? "out of memory"
			      : why[0]	   ? why
					   : strerror(-r));
	}
	json_decref(copy);
	free(g);
	return r < 0 ? r : (int)changed;
}

static const char *map_class(const ds_dra_config *dra, const char *name)
{
	for (size_t i = 0; name && i < dra->n_device_classes; i++)
		if (strcmp(dra->device_classes[i].from, name) == 0)
			return dra->device_classes[i].to;
	return NULL;
}

static int rename_class(const ds_dra_config *dra, json_t *holder, const char *what,
			const char *request, ds_report *rep)
{
	const char *from = ds_json_str(holder, "deviceClassName");
	const char *to = map_class(dra, from);
	char f[300], msg[100];

	if (!to)
		return 0;
	snprintf(f, sizeof(f), "deviceClassName=%s", from);
	snprintf(msg, sizeof(msg), "(deviceClassMappings)");
	if (ds_report_add(rep, DS_REPORT_DEVICE_CLASS, what, NULL, request, f, to, msg) < 0)
		return -ENOMEM;
	/* `from` dies with the old string: report first, then replace. */
	return json_object_set_new(holder, "deviceClassName", json_string(to)) < 0 ? -ENOMEM : 1;
}

int ds_dra_map_device_classes(const ds_dra_config *dra, json_t *obj, ds_report *rep)
{
	const char *kind = ds_obj_kind(obj);
	json_t *requests;
	char what[300], req[200];
	int changed = 0, r;
	size_t i;
	json_t *rq;

	if (!kind || dra->n_device_classes == 0 || !ds_obj_in_group(obj, "resource.k8s.io"))
		return 0;
	if (ds_kind_is(kind, DS_KIND_RESOURCE_CLAIM))
		requests = ds_json_path(obj, "spec.devices.requests");
	else if (ds_kind_is(kind, DS_KIND_RESOURCE_CLAIM_TEMPLATE))
		requests = ds_json_path(obj, "spec.spec.devices.requests");
	else
		return 0;
	if (!json_is_array(requests))
		return 0;
	ds_obj_describe(obj, what, sizeof(what));
	json_array_foreach (requests, i, rq) {
		const char *rname = ds_json_str(rq, "name");
		json_t *subs = json_object_get(rq, "firstAvailable");
		size_t k;
		json_t *sub;

		snprintf(req, sizeof(req), "%s", rname ? rname : "?");
		if ((r = rename_class(dra, rq, what, req, rep)) < 0)
			return r;
		changed += r;
		if ((r = rename_class(dra, json_object_get(rq, "exactly"), what, req, rep)) < 0)
			return r;
		changed += r;
		json_array_foreach (subs, k, sub) {
			const char *sname = ds_json_str(sub, "name");

			snprintf(req, sizeof(req), "%s/%s", rname ? rname : "?",
				 sname ? sname : "?");
			if ((r = rename_class(dra, sub, what, req, rep)) < 0)
				return r;
			changed += r;
		}
	}
	return changed;
}
