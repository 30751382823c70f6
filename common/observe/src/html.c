#include "drasync/html.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

int ds_html_escape(ds_str *out, const char *s)
{
	for (const char *p = s; p && *p; p++) {
		const char *ref = NULL;

		switch (*p) {
		case '&':
			ref = "&amp;";
			break;
		case '<':
			ref = "&lt;";
			break;
		case '>':
			ref = "&gt;";
			break;
		case '"':
			ref = "&quot;";
			break;
		case '\'':
			ref = "&#39;";
			break;
		default:
			/* control characters have no business in a page */
			if ((unsigned char)*p < 0x20 && *p != '\t' && *p != '\n')
				continue;
		}
		if (ref)
			ds_str_adds(out, ref);
		else
			ds_str_add(out, p, 1);
	}
	return ds_str_error(out);
}

int ds_html_escapef(ds_str *out, const char *fmt, ...)
{
	va_list ap;
	char *text = NULL;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&text, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -ENOMEM;
	ds_html_escape(out, text);
	free(text);
	return ds_str_error(out);
}
