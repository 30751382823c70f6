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

#include "dra_mapping_internal.h"

#define NAME_MAX_LEN 64 /* DNS label + NUL */

const char *const ds_dra_ref_field[DS_TARGET_KIND_MAX] = {
    "resourceClaimName",
    "resourceClaimTemplateName",
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
		   a->list, a->index, ds_dra_ref_field[a->target_kind], a->target, b->list,
		   b->index, ds_dra_ref_field[b->target_kind], b->target,
		   ds_dra_rule_specificity(a));
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

void ds_dra_names_dispose(struct names *ns)
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
int ds_dra_unique_name(struct names *ns, const char *base, const char *suffix, char **out)
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

void ds_dra_ref_text(enum ds_target_kind kind, const char *name, char *buf, size_t size)
{
	snprintf(buf, size, "%s=%s", ds_dra_ref_field[kind], name);
}

json_t *ds_dra_entry_json(const char *name, enum ds_target_kind kind, const char *target)
{
	json_t *e = json_object();

	if (!e || json_object_set_new(e, "name", json_string(name)) < 0 ||
	    json_object_set_new(e, ds_dra_ref_field[kind], json_string(target)) < 0) {
		json_decref(e);
		return NULL;
	}
	return e;
}

/* Point an entry at (kind, target), removing the other reference field. */
int ds_dra_retarget(json_t *entry, enum ds_target_kind kind, const char *target)
{
	json_object_del(
	    entry,
	    ds_dra_ref_field[kind == DS_TARGET_CLAIM ? DS_TARGET_TEMPLATE : DS_TARGET_CLAIM]);
	return json_object_set_new(entry, ds_dra_ref_field[kind], json_string(target)) < 0 ? -ENOMEM
											   : 0;
}

int ds_dra_fail(struct ctx *c, const char *fmt, ...)
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

int ds_dra_collect_entries(struct ctx *c)
{
	json_t *rcs = json_object_get(c->spec, "resourceClaims");
	size_t i;
	json_t *v;

	if (!rcs || json_is_null(rcs))
		return 0;
	if (!json_is_array(rcs))
		return ds_dra_fail(c, "spec.resourceClaims is not a list");
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
			return ds_dra_fail(c, "spec.resourceClaims[%zu] has no name", i);
		if ((claim && tmpl) || (!claim && !tmpl))
			return ds_dra_fail(c,
					   "spec.resourceClaims[%zu] (%s) must set exactly one of "
					   "resourceClaimName and resourceClaimTemplateName",
					   i, e->name);
		e->kind = claim ? DS_TARGET_CLAIM : DS_TARGET_TEMPLATE;
		e->source = claim ? claim : tmpl;
		if (names_has(&c->names, e->name))
			return ds_dra_fail(c, "spec.resourceClaims has two entries named %s",
					   e->name);
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
int ds_dra_collect_refs(struct ctx *c)
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
				return ds_dra_fail(c, "%s[%zu] has no name", lists[l], i);
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
					return ds_dra_fail(c,
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
int ds_dra_group_read(json_t *rcs, const char *path, struct gentry **out, size_t *n, char *why,
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
int ds_dra_group_decide(const ds_dra_config *dra, int type, const char *instance, struct gentry *g,
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
				return ds_dra_fail(
				    c,
				    "claim %s shares %s's claim (%s=%s): %s maps it for "
				    "container %s to %s=%s, but %s gives the group %s=%s; "
				    "group and members must agree (name the group in the "
				    "rule: objectType: PodGroup, objectInstance: %s)",
				    e->name, c->g_what, ds_dra_ref_field[e->kind], e->source, a,
				    rf->cname ? rf->cname : "ALL", ds_dra_ref_field[rf->kind],
				    rf->target, b, ds_dra_ref_field[kind], target, c->g_name);
			return ds_dra_fail(
			    c,
			    "claim %s is shared with spec.scheduling.resourceClaims: %s "
			    "maps it for container %s to %s=%s, %s for %s to %s=%s; a "
			    "shared claim cannot be split",
			    e->name, a, rf->cname ? rf->cname : "ALL", ds_dra_ref_field[rf->kind],
			    rf->target, b, by, ds_dra_ref_field[kind], target);
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

int ds_dra_resolve_refs(struct ctx *c)
{
	ds_err why = {0};

	for (size_t i = 0; i < c->n_refs; i++) {
		struct ref *rf = &c->refs[i];
		const ds_dra_rule *w = NULL;

		if (pick(c->dra, c->workload, c->instance, rf->cname, rf->e->name, rf->e->source, 1,
			 rf->e->kind, 0, &w, &why) < 0)
			return ds_dra_fail(c, "container %s, claim %s: %s",
					   rf->cname ? rf->cname : "ALL", rf->e->name, why.msg);
		rf->winner = w;
		rf->kind = w ? w->target_kind : rf->e->kind;
		rf->target = w ? w->target : rf->e->source;
		rf->new_name = rf->e->name;
	}
	for (size_t i = 0; i < c->n_attaches; i++) {
		struct attach *a = &c->attaches[i];

		if (pick(c->dra, c->workload, c->instance, a->cname, NULL, NULL, 0, DS_TARGET_CLAIM,
			 1, &a->rule, &why) < 0)
			return ds_dra_fail(c, "container %s (attach): %s", a->cname, why.msg);
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
			 a, ds_dra_ref_field[own->target_kind], own->target, b,
			 ds_dra_ref_field[g->tkind], g->target);
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
		if ((r = ds_dra_group_read(ds_json_path(group, "spec.resourceClaims"),
					   "the group's spec.resourceClaims", &c.g, &c.n_g, c.why,
					   sizeof(c.why))) < 0 ||
		    (r = ds_dra_group_decide(dra, DS_RULE_PODGROUP, ds_obj_name(group), c.g, c.n_g,
					     c.g_what, c.why, sizeof(c.why))) < 0)
			goto out;
		/* This member's own rule decides what no group rule does (others unknown). */
		if (ds_dra_group_follow(dra, c.g, c.n_g, c.g_what, ds_obj_name(group), NULL, obj,
					NULL, c.why, sizeof(c.why)) == -ENOMEM) {
			r = -ENOMEM;
			goto out;
		}
	}
	if ((r = ds_dra_collect_entries(&c)) < 0 || (r = ds_dra_collect_refs(&c)) < 0)
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
	ds_dra_names_dispose(&c.names);
	free(c.g);
	free(c.entries);
	free(c.refs);
	free(c.attaches);
	return ds_err_fallback(err, r);
}
