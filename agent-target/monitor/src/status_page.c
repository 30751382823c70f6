#include "drasync/status_page.h"

#include "drasync/html.h"
#include "drasync/namespace_mode.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

/* Inline style only: the page must render with nothing reachable but the agent. */
static const char style[] =
    "body{font-family:sans-serif;margin:1.5em;color:#222}"
    "table{border-collapse:collapse;margin-bottom:1.2em}"
    "th,td{border:1px solid #bbb;padding:.25em .6em;text-align:left;vertical-align:top}"
    "th{background:#eee}td.n{text-align:right}"
    ".bad{color:#a00;font-weight:bold}.ok{color:#070}"
    "h2{margin-top:1.4em;border-bottom:1px solid #ccc}";

static void when(ds_str *o, int64_t t)
{
	char b[40];
	struct tm tm;
	time_t tt = (time_t)t;

	if (t <= 0) {
		ds_str_adds(o, "never");
		return;
	}
	gmtime_r(&tt, &tm);
	strftime(b, sizeof(b), "%Y-%m-%d %H:%M:%SZ", &tm);
	ds_html_escape(o, b);
}

static void th(ds_str *o, const char *const *names)
{
	ds_str_adds(o, "<tr>");
	for (; *names; names++) {
		ds_str_adds(o, "<th>");
		ds_html_escape(o, *names);
		ds_str_adds(o, "</th>");
	}
	ds_str_adds(o, "</tr>\n");
}

static void td(ds_str *o, const char *v)
{
	ds_str_adds(o, "<td>");
	ds_html_escape(o, v ? v : "");
	ds_str_adds(o, "</td>");
}

static void td_class(ds_str *o, const char *cls, const char *v)
{
	ds_str_addf(o, "<td class=\"%s\">", cls);
	ds_html_escape(o, v ? v : "");
	ds_str_adds(o, "</td>");
}

static void td_num(ds_str *o, unsigned long long v)
{
	ds_str_addf(o, "<td class=\"n\">%llu</td>", v);
}

static void td_when(ds_str *o, int64_t t)
{
	ds_str_adds(o, "<td>");
	when(o, t);
	ds_str_adds(o, "</td>");
}

static int64_t lag_seconds(const ds_ledger_source *s, int64_t now)
{
	return s->unapplied && s->oldest_unapplied && now > s->oldest_unapplied
		   ? now - s->oldest_unapplied
		   : 0;
}

static void sources(ds_str *o, const ds_ledger_status *st, int64_t now)
{
	ds_str_adds(o, "<h2 id=\"sources\">Sources</h2>\n");
	if (!st->n_sources) {
		ds_str_adds(o, "<p>No source has connected yet.</p>\n");
		return;
	}
	ds_str_adds(o, "<table id=\"sources-table\">\n");
	th(o, (const char *[]){"source", "cluster", "epoch", "committed seq", "last contact",
			       "unapplied records", "lag (s)", "objects", NULL});
	for (size_t i = 0; i < st->n_sources; i++) {
		const ds_ledger_source *s = &st->sources[i];
		int64_t lag = lag_seconds(s, now);

		ds_str_adds(o, "<tr>");
		td(o, s->name);
		td(o, s->cluster);
		td_num(o, (unsigned long long)s->epoch);
		td_num(o, (unsigned long long)s->committed_seq);
		td_when(o, s->last_contact);
		td_num(o, (unsigned long long)s->unapplied);
		ds_str_addf(o, "<td class=\"n%s\">%lld</td>", lag > 300 ? " bad" : "",
			    (long long)lag);
		td_num(o, (unsigned long long)s->objects);
		ds_str_adds(o, "</tr>\n");
	}
	ds_str_adds(o, "</table>\n");
}

static void namespaces(ds_str *o, const ds_ledger_status *st, enum ds_mode conf)
{
	ds_str_adds(o, "<h2 id=\"namespaces\">Namespaces</h2>\n");
	if (!st->n_namespaces) {
		ds_str_adds(o, "<p>No namespace has objects yet.</p>\n");
		return;
	}
	ds_str_adds(o, "<table id=\"namespaces-table\">\n");
	th(o,
	   (const char *[]){"namespace", "mode", "since", "changed by", "objects", "held", NULL});
	for (size_t i = 0; i < st->n_namespaces; i++) {
		const ds_ledger_namespace *n = &st->namespaces[i];

		ds_str_adds(o, "<tr>");
		td(o, n->name);
		td(o, ds_namespace_mode_word(n->recorded ? n->mode : conf));
		if (n->recorded)
			td_when(o, n->since);
		else
			td(o, "-");
		td(o, n->recorded ? n->changed_by : "config");
		td_num(o, (unsigned long long)n->objects);
		td_num(o, (unsigned long long)n->held);
		ds_str_adds(o, "</tr>\n");
	}
	ds_str_adds(o, "</table>\n");
}

static void objects(ds_str *o, const ds_ledger_status *st)
{
	ds_str_adds(o, "<h2 id=\"objects\">Objects</h2>\n<table id=\"objects-table\">\n<tr>");
	for (int s = 1; s < DS_APPLY_STATE_MAX; s++) {
		ds_str_adds(o, "<th>");
		ds_html_escape(o, ds_apply_state_name((enum ds_apply_state)s));
		ds_str_adds(o, "</th>");
	}
	ds_str_adds(o, "</tr>\n<tr>");
	for (int s = 1; s < DS_APPLY_STATE_MAX; s++)
		td_num(o, (unsigned long long)st->states[s]);
	ds_str_adds(o, "</tr>\n</table>\n");
	ds_str_adds(o,
		    "<h2 id=\"attention\">Objects waiting or failed, and records refused</h2>\n");
	if (!st->n_items) {
		ds_str_adds(o, "<p class=\"ok\">None.</p>\n");
		return;
	}
	ds_str_adds(o, "<table id=\"attention-table\">\n");
	th(o, (const char *[]){"state", "kind", "namespace", "name", "source", "since", "reason",
			       NULL});
	for (size_t i = 0; i < st->n_items; i++) {
		const ds_ledger_item *it = &st->items[i];

		ds_str_adds(o, "<tr>");
		td_class(o,
			 it->state == DS_APPLY_FAILED || it->state == DS_APPLY_REFUSED ? "bad" : "",
			 ds_apply_state_name(it->state));
		td(o, it->kind);
		td(o, it->ns);
		td(o, it->name);
		td(o, it->source);
		td_when(o, it->updated_at);
		td(o, it->reason);
		ds_str_adds(o, "</tr>\n");
	}
	ds_str_adds(o, "</table>\n");
	if (st->more_items)
		ds_str_addf(o, "<p>... and %llu more (drasync-target status lists them).</p>\n",
			    (unsigned long long)st->more_items);
}

static void verification(ds_str *o, const ds_ledger_status *st)
{
	ds_str_adds(o, "<h2 id=\"verification\">Verification</h2>\n<p>");
	ds_str_addf(o,
		    "Workloads verified: <span class=\"ok\">%llu</span>, not verified: <span "
		    "class=\"%s\">%llu</span>; last check: ",
		    (unsigned long long)st->verified, st->not_verified ? "bad" : "ok",
		    (unsigned long long)st->not_verified);
	when(o, st->last_checked);
	ds_str_adds(o, ".</p>\n");
	if (!st->n_verifications)
		return;
	ds_str_adds(o, "<table id=\"verification-table\">\n");
	th(o, (const char *[]){"result", "kind", "namespace", "name", "form", "checked", "seconds",
			       "reason", NULL});
	for (size_t i = 0; i < st->n_verifications; i++) {
		const ds_ledger_verification *v = &st->verifications[i];

		ds_str_adds(o, "<tr>");
		td_class(o, v->verified ? "ok" : "bad", v->verified ? "verified" : "not verified");
		td(o, v->kind);
		td(o, v->ns);
		td(o, v->name);
		td(o, v->form);
		td_when(o, v->checked_at);
		ds_str_addf(o, "<td class=\"n\">%.1f</td>", v->seconds);
		td(o, v->reason);
		ds_str_adds(o, "</tr>\n");
	}
	ds_str_adds(o, "</table>\n");
}

/* The inventory is read from the ledger at most every few seconds, not at each request. */
static void inventory_built(ds_str *o, int64_t built)
{
	if (built <= 0)
		return;
	ds_str_adds(o, "<p id=\"inventory-built\">Read from the ledger ");
	when(o, built);
	ds_str_adds(o, ".</p>\n");
}

static void inventory(ds_str *o, const ds_inventory *inv, int64_t built)
{
	char line[32];

	ds_str_adds(o, "<h2 id=\"inventory\">Mapping inventory</h2>\n");
	inventory_built(o, built);
	if (!inv->n_refs) {
		ds_str_adds(o, "<p>No claim reference in the ledger.</p>\n");
		return;
	}
	ds_str_addf(o, "<p>%zu rows, %zu unmapped, %zu missing on this cluster.</p>\n", inv->n_refs,
		    ds_inventory_unmapped(inv), ds_inventory_missing(inv));
	ds_str_adds(o, "<table id=\"inventory-table\">\n");
	th(o, (const char *[]){"type", "source", "namespace", "target namespace", "object",
			       "instance", "container", "entry", "references", "maps to", "rule",
			       "exists", "note", NULL});
	for (size_t i = 0; i < inv->n_refs; i++) {
		const ds_inventory_ref *r = &inv->refs[i];

		ds_str_adds(o, "<tr>");
		td(o, ds_inventory_type_name(r->type));
		td(o, r->source);
		td(o, r->ns);
		td(o, r->target_ns);
		td(o, r->object_type);
		td(o, r->instance);
		td(o, r->container ? r->container : (r->entry ? "ALL" : ""));
		td(o, r->entry);
		ds_str_adds(o, "<td>");
		if (r->from) {
			ds_html_escape(o, ds_inventory_kind_key(r->kind));
			ds_str_adds(o, " ");
			ds_html_escape(o, r->from);
		}
		ds_str_adds(o, "</td><td>");
		if (r->target) {
			ds_html_escape(o, ds_inventory_kind_key(r->target_kind));
			ds_str_adds(o, " ");
			ds_html_escape(o, r->target);
		}
		ds_str_adds(o, "</td>");
		if (r->rule && r->rule_line) {
			snprintf(line, sizeof(line), " (line %d)", r->rule_line);
			ds_str_adds(o, "<td>");
			ds_html_escape(o, r->rule);
			ds_html_escape(o, line);
			ds_str_adds(o, "</td>");
		} else {
			td_class(o, r->rule ? "" : "bad", r->rule ? r->rule : "unmapped");
		}
		td_class(o, ds_inventory_ref_missing(r) ? "bad" : "",
			 r->replicated && r->exists != DS_EXISTS_YES
			     ? "replicated"
			     : ds_inventory_exists_name(r->exists));
		td(o, r->error ? r->error : r->exists_reason);
		ds_str_adds(o, "</tr>\n");
	}
	ds_str_adds(o, "</table>\n");
}

int ds_status_page_render(ds_str *o, const ds_status_page *p)
{
	enum ds_mode conf = p->cfg ? ds_target_config_mode(p->cfg) : DS_MODE_STANDBY;

	ds_str_adds(o, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
		       "<title>drasync target</title>\n<style>");
	ds_str_adds(o, style);
	ds_str_adds(o, "</style>\n</head>\n<body>\n<h1>drasync target</h1>\n<p id=\"summary\">");
	ds_str_adds(o, "Ready: ");
	if (p->ready)
		ds_str_adds(o, "<span class=\"ok\">yes</span>");
	else {
		ds_str_adds(o, "<span class=\"bad\">no</span> (");
		ds_html_escape(o, p->not_ready);
		ds_str_adds(o, ")");
	}
	ds_str_adds(o, ". Mode in the configuration: ");
	ds_html_escape(o, ds_mode_name(conf));
	ds_str_adds(o, ". Configuration: ");
	ds_html_escape(o, p->config_path ? p->config_path : "-");
	ds_str_adds(o, ". Ledger: ");
	ds_html_escape(o, p->ledger_path ? p->ledger_path : "-");
	ds_str_adds(o, ". Link: ");
	ds_html_escape(o, p->listen ? p->listen : "-");
	ds_str_addf(o, ". Wire: %llu bytes received, %llu sent for %llu bytes of JSON (%.2f of it)",
		    (unsigned long long)p->wire.received, (unsigned long long)p->wire.sent,
		    (unsigned long long)p->wire.json,
		    ds_link_figures_ratio(p->wire.sent, p->wire.received, p->wire.json));
	ds_str_adds(o, ". Generated ");
	when(o, p->now);
	ds_str_adds(o, ".</p>\n");
	if (p->st) {
		sources(o, p->st, p->now);
		namespaces(o, p->st, conf);
		objects(o, p->st);
		verification(o, p->st);
	} else {
		ds_str_adds(o,
			    "<h2 id=\"sources\">Sources</h2>\n<p class=\"bad\">The ledger cannot "
			    "be read: ");
		ds_html_escape(o, p->ledger_error);
		ds_str_adds(o, "</p>\n");
	}
	if (p->inv) {
		inventory(o, p->inv, p->inventory_built);
	} else {
		ds_str_adds(o, "<h2 id=\"inventory\">Mapping inventory</h2>\n");
		inventory_built(o, p->inventory_built);
		ds_str_adds(o, "<p class=\"bad\">");
		ds_html_escape(o, p->inventory_error);
		ds_str_adds(o, "</p>\n");
	}
	ds_str_adds(o, "<p>Metrics: <a href=\"/metrics\">/metrics</a>, health: <a "
		       "href=\"/healthz\">/healthz</a>, <a href=\"/readyz\">/readyz</a>.</p>\n"
		       "</body>\n</html>\n");
	return ds_str_error(o);
}
