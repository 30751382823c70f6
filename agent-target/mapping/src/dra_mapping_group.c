/*
 * A PodGroup's claims follow its members (SPEC §2, issue 24): an entry of the
 * group that no rule naming the group decides takes what the rules make of
 * the members' entries that share it, when every member resolves it the same
 * way. Members that resolve it differently, or a member rule against the
 * group's own rule, are an error for the group naming both.
 */
#include "drasync/dra_mapping.h"
#include "drasync/k8s_object.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dra_mapping_internal.h"

/* What one member makes of one group entry: a rule's target, or kept (rule NULL). */
struct vote {
	bool set;
	const ds_dra_rule *rule;
	enum ds_target_kind kind;
	const char *target;
	const char *cname; /* the container whose rule it is, NULL: ALL */
	char by[300];	   /* the member, "Deployment ns/name" */
};

static bool same(enum ds_target_kind ka, const char *ta, enum ds_target_kind kb, const char *tb)
{
	return ka == kb && strcmp(ta, tb) == 0;
}

static void rule_text(const ds_dra_rule *r, char *buf, size_t size)
{
	if (r)
		snprintf(buf, size, "rule dra.%s[%zu] (line %d)", r->list, r->index, r->line);
	else
		snprintf(buf, size, "no rule");
}

static ptrdiff_t shared_with(const struct gentry *g, size_t n, const struct entry *e)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(g[i].name, e->name) == 0 && g[i].kind == e->kind &&
		    strcmp(g[i].source, e->source) == 0)
			return (ptrdiff_t)i;
	return -1;
}

/*
 * How member m resolves each group entry its pod spec shares (mine[i]); a
 * member whose own spec or rules fail is left out: its own mapping reports it.
 * Two of its references that map one shared entry differently are a split.
 * @return 0, -EINVAL (why, *conflict), -ENOMEM
 */
static int member_votes(const ds_dra_config *dra, const json_t *m, const char *ns,
			const struct gentry *g, size_t n, struct vote *mine, char *why, size_t size)
{
	struct ctx c = {.dra = dra};
	enum ds_workload w;
	int r = 0;

	memset(mine, 0, n * sizeof(*mine));
	c.spec = ds_obj_pod_spec(m, &w);
	if (!c.spec)
		return 0;
	c.workload = (int)w;
	c.instance = ds_obj_name(m);
	if ((r = ds_dra_collect_entries(&c)) < 0 || (r = ds_dra_collect_refs(&c)) < 0) {
		r = r == -ENOMEM ? r : 0;
		goto out;
	}
	for (size_t k = 0; k < c.n_refs; k++) {
		const struct ref *rf = &c.refs[k];
		ptrdiff_t i = shared_with(g, n, rf->e);
		const ds_dra_rule *win = NULL;
		ds_err e = {0};
		struct vote *v;
		char a[120], b[120];

		if (i < 0)
			continue;
		v = &mine[i];
		if (!v->set) {
			v->set = true;
			v->kind = g[i].kind;
			v->target = g[i].source;
			ds_obj_describe_in(m, ns, v->by, sizeof(v->by));
		}
		if (ds_dra_resolve(dra, c.workload, c.instance, rf->cname, rf->e->name,
				   rf->e->source, rf->e->kind, &win, &e) < 0 ||
		    !win)
			continue;
		if (!v->rule) {
			v->rule = win;
			v->kind = win->target_kind;
			v->target = win->target;
			v->cname = rf->cname;
			continue;
		}
		if (same(v->kind, v->target, win->target_kind, win->target))
			continue;
		rule_text(win, a, sizeof(a));
		rule_text(v->rule, b, sizeof(b));
		snprintf(why, size,
			 "%s: claim %s is shared with a group: %s maps it for container %s to "
			 "%s=%s, %s for %s to %s=%s; a shared claim cannot be split",
			 v->by, g[i].name, a, rf->cname ? rf->cname : "ALL",
			 ds_dra_ref_field[win->target_kind], win->target, b,
			 v->cname ? v->cname : "ALL", ds_dra_ref_field[v->kind], v->target);
		r = -EINVAL;
		goto out;
	}
	r = 0;
out:
	ds_dra_names_dispose(&c.names);
	free(c.entries);
	free(c.refs);
	free(c.attaches);
	return r;
}

static bool same_object(const json_t *a, const json_t *b)
{
	/* Members are of the group's namespace; the one being mapped may be in its target's. */
	const char *ka = ds_obj_kind(a), *kb = ds_obj_kind(b);
	const char *na = ds_obj_name(a), *nb = ds_obj_name(b);

	return ka && kb && na && nb && strcmp(ka, kb) == 0 && strcmp(na, nb) == 0;
}

/* Fold one member's votes into the group's decision (agreed). @return 0, -EINVAL (why) */
static int fold(struct gentry *g, size_t n, const char *gwhat, const char *hint,
		const struct vote *mine, struct vote *agreed, char *why, size_t size)
{
	for (size_t i = 0; i < n; i++) {
		const struct vote *v = &mine[i];
		char a[120], b[120];

		if (!v->set)
			continue;
		if (g[i].rule) {
			/* The group's own rule decides; a member without a rule follows it. */
			if (!v->rule || same(v->kind, v->target, g[i].tkind, g[i].target))
				continue;
			rule_text(v->rule, a, sizeof(a));
			rule_text(g[i].rule, b, sizeof(b));
			snprintf(why, size,
				 "%s: claim %s shares %s's claim (%s=%s): %s maps it to %s=%s, "
				 "but %s gives the group %s=%s; group and members must agree",
				 v->by, g[i].name, gwhat, ds_dra_ref_field[g[i].kind], g[i].source,
				 a, ds_dra_ref_field[v->kind], v->target, b,
				 ds_dra_ref_field[g[i].tkind], g[i].target);
			return -EINVAL;
		}
		if (!agreed[i].set) {
			agreed[i] = *v;
			continue;
		}
		if (same(v->kind, v->target, agreed[i].kind, agreed[i].target))
			continue;
		rule_text(v->rule, a, sizeof(a));
		rule_text(agreed[i].rule, b, sizeof(b));
		snprintf(why, size,
			 "%s: claim %s shares %s's claim (%s=%s): %s maps it to %s=%s, but for "
			 "%s %s maps it to %s=%s; %s",
			 v->by, g[i].name, gwhat, ds_dra_ref_field[g[i].kind], g[i].source, a,
			 ds_dra_ref_field[v->kind], v->target, agreed[i].by, b,
			 ds_dra_ref_field[agreed[i].kind], agreed[i].target, hint);
		return -EINVAL;
	}
	return 0;
}

int ds_dra_group_follow(const ds_dra_config *dra, struct gentry *g, size_t n, const char *gwhat,
			const char *gname, const json_t *members, const json_t *self,
			const char *ns, char *why, size_t size)
{
	struct vote *agreed, *mine;
	char hint[400];
	bool self_done = false;
	size_t i;
	json_t *m;
	int r = 0;

	if (n == 0)
		return 0;
	snprintf(hint, sizeof(hint),
		 "the members of a group must agree (one rule for all of them, or name the "
		 "group: objectType: PodGroup, objectInstance: %.200s)",
		 gname);
	agreed = calloc(n, sizeof(*agreed));
	mine = calloc(n, sizeof(*mine));
	if (!agreed || !mine) {
		r = -ENOMEM;
		goto out;
	}
	/* The members in their order, `self` (maybe newer than its copy there) in its place. */
	json_array_foreach (members, i, m) {
		const json_t *obj = m;

		if (self && same_object(m, self)) {
			if (self_done)
				continue;
			obj = self;
			self_done = true;
		}
		if ((r = member_votes(dra, obj, ns, g, n, mine, why, size)) < 0 ||
		    (r = fold(g, n, gwhat, hint, mine, agreed, why, size)) < 0)
			goto out;
	}
	if (self && !self_done &&
	    ((r = member_votes(dra, self, ns, g, n, mine, why, size)) < 0 ||
	     (r = fold(g, n, gwhat, hint, mine, agreed, why, size)) < 0))
		goto out;
	for (i = 0; i < n; i++)
		if (!g[i].rule && agreed[i].set && agreed[i].rule) {
			g[i].rule = agreed[i].rule;
			g[i].tkind = agreed[i].kind;
			g[i].target = agreed[i].target;
			snprintf(g[i].follows, sizeof(g[i].follows), "%.150s", agreed[i].by);
		}
out:
	free(agreed);
	free(mine);
	return r;
}

const char *ds_dra_group_workload(const json_t *pg)
{
	const json_t *spec = json_object_get(pg, "spec");
	const char *w =
	    ds_json_str(ds_json_path(spec, "podGroupTemplateRef.workload"), "workloadName");

	return w ? w : ds_json_str(json_object_get(spec, "workloadRef"), "workloadName");
}

/* Whether PodGroup pg was made from template tname of Workload wname (either version's field). */
static bool made_from(const json_t *pg, const char *wname, const char *tname)
{
	const json_t *spec = json_object_get(pg, "spec");
	const json_t *ref = ds_json_path(spec, "podGroupTemplateRef.workload");
	const char *w = ds_json_str(ref, "workloadName");
	const char *t = ds_json_str(ref, "podGroupTemplateName");

	if (!ref) {
		ref = json_object_get(spec, "workloadRef");
		w = ds_json_str(ref, "workloadName");
		t = ds_json_str(ref, "templateName");
	}
	return w && t && strcmp(w, wname) == 0 && strcmp(t, tname) == 0;
}

int ds_dra_template_follow(const ds_dra_config *dra, struct gentry *g, size_t n, const char *wwhat,
			   const char *wname, const char *tname, const json_t *groups,
			   const char *ns, char *why, size_t size)
{
	struct vote *agreed, *mine;
	char hint[400];
	size_t i;
	json_t *x;
	int r = 0;

	if (n == 0)
		return 0;
	snprintf(hint, sizeof(hint),
		 "the PodGroups made from template %.100s must agree (one rule for all, or "
		 "name the Workload: objectType: Workload, objectInstance: %.100s)",
		 tname, wname);
	agreed = calloc(n, sizeof(*agreed));
	mine = calloc(n, sizeof(*mine));
	if (!agreed || !mine) {
		r = -ENOMEM;
		goto out;
	}
	json_array_foreach (groups, i, x) {
		const json_t *pg = json_object_get(x, "podGroup");
		struct gentry *pe = NULL;
		size_t pn = 0;
		char pwhat[300];

		if (!pg || !made_from(pg, wname, tname))
			continue;
		ds_obj_describe_in(pg, ns, pwhat, sizeof(pwhat));
		/* What the group's own rules and its members make of its entries. */
		if ((r = ds_dra_group_read(ds_json_path(pg, "spec.resourceClaims"),
					   "spec.resourceClaims", &pe, &pn, why, size)) < 0 ||
		    (r = ds_dra_group_decide(dra, DS_RULE_PODGROUP, ds_obj_name(pg), pe, pn, pwhat,
					     why, size)) < 0 ||
		    (r = ds_dra_group_follow(dra, pe, pn, pwhat, ds_obj_name(pg),
					     json_object_get(x, "members"), NULL, ns, why, size)) <
			0) {
			free(pe);
			goto out;
		}
		memset(mine, 0, n * sizeof(*mine));
		for (size_t j = 0; j < pn; j++) {
			struct entry e = {
			    .name = pe[j].name, .kind = pe[j].kind, .source = pe[j].source};
			ptrdiff_t k = shared_with(g, n, &e);

			if (k < 0)
				continue;
			mine[k] = (struct vote){.set = true,
						.rule = pe[j].rule,
						.kind = pe[j].tkind,
						.target = pe[j].target};
			snprintf(mine[k].by, sizeof(mine[k].by), "%s", pwhat);
		}
		free(pe);
		if ((r = fold(g, n, wwhat, hint, mine, agreed, why, size)) < 0)
			goto out;
	}
	for (i = 0; i < n; i++)
		if (!g[i].rule && agreed[i].set && agreed[i].rule) {
			g[i].rule = agreed[i].rule;
			g[i].tkind = agreed[i].kind;
			g[i].target = agreed[i].target;
			snprintf(g[i].follows, sizeof(g[i].follows), "%.150s", agreed[i].by);
		}
out:
	free(agreed);
	free(mine);
	return r;
}
