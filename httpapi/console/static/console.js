// webhookd console: progressive niceties only. Every page works without
// this file; it is served from 'self' because the Content-Security-Policy
// allows no inline script.
(function () {
	"use strict";

	// Ask before sending a form marked data-confirm (a range replay,
	// enabling an endpoint from now on).
	document.addEventListener("submit", function (e) {
		var msg = e.target.getAttribute("data-confirm");
		if (msg && !window.confirm(msg)) {
			e.preventDefault();
		}
	});

	// A portal session's Log out (its form carries data-return): post it
	// here, in the frame, where the session's cookie is, then take the
	// whole window back to the app. The click's user activation lets a
	// cross-site frame move the top window. Without JavaScript the form
	// posts as usual and the answer offers the way back.
	document.addEventListener("submit", function (e) {
		var form = e.target, back = form.getAttribute("data-return");
		if (!back || !window.fetch || e.defaultPrevented) {
			return;
		}
		e.preventDefault();
		fetch(form.action, { method: "POST", body: new URLSearchParams(new FormData(form)), credentials: "same-origin", redirect: "manual" })
			.then(function () { window.top.location.href = back; })
			.catch(function () { form.submit(); });
	});

	// Reload a delivery whose next attempt is due soon or in flight, so
	// its attempts appear as they are made; stop after two minutes.
	var live = document.querySelector("[data-refresh]");
	if (live) {
		var secs = parseInt(live.getAttribute("data-refresh"), 10) || 2;
		var key = "webhookd-reloads:" + location.pathname;
		var n = parseInt(sessionStorage.getItem(key) || "0", 10);
		if (n * secs < 120) {
			sessionStorage.setItem(key, String(n + 1));
			setTimeout(function () { location.reload(); }, secs * 1000);
		}
	} else if (window.sessionStorage) {
		sessionStorage.removeItem("webhookd-reloads:" + location.pathname);
	}

	// A portal link's page opens the link at once (the button does it
	// without JavaScript).
	var auto = document.querySelector("form[data-autosubmit]");
	if (auto) {
		auto.submit();
	}

	// In a frame (the portal inside the operator's app), tell the parent
	// how tall the page is, now and whenever it changes, so that the app
	// can size the frame to it and there is one scrollbar, the app's
	// (docs/portal.md has the app's side). The message says nothing but
	// the height, so any parent may read it: the frame-ancestors policy
	// already limits who can frame the console.
	if (window.parent !== window && window.ResizeObserver) {
		var last = 0;
		var post = function () {
			var h = Math.ceil(document.documentElement.getBoundingClientRect().height);
			if (h !== last) {
				last = h;
				window.parent.postMessage({ type: "webhookd:resize", height: h }, "*");
			}
		};
		new ResizeObserver(post).observe(document.documentElement);
		post();
	}

	// Times: the server writes UTC; show the browser's local time and how
	// long ago, with the UTC text as the title.
	var rel = window.Intl && Intl.RelativeTimeFormat ? new Intl.RelativeTimeFormat(undefined, { numeric: "auto" }) : null;
	var ago = function (ms) {
		var s = Math.round(ms / 1000), units = [["year", 31536000], ["month", 2592000], ["day", 86400], ["hour", 3600], ["minute", 60], ["second", 1]];
		for (var i = 0; i < units.length; i++) {
			if (Math.abs(s) >= units[i][1] || units[i][0] === "second") {
				return rel.format(Math.round(s / units[i][1]), units[i][0]);
			}
		}
	};
	var times = document.querySelectorAll("time[datetime]");
	times.forEach(function (el) {
		var d = new Date(el.getAttribute("datetime"));
		if (isNaN(d)) {
			return;
		}
		el.title = el.textContent;
		el.textContent = d.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "medium" }) + (rel ? " (" + ago(d - Date.now()) + ")" : "");
	});
	var note = document.getElementById("tz-note");
	if (note && times.length) {
		note.textContent = "Times are in your time zone (" + Intl.DateTimeFormat().resolvedOptions().timeZone + "); hover over one for UTC.";
	}

	// Copy buttons (hidden without JavaScript).
	document.querySelectorAll("[data-copy]").forEach(function (b) {
		var target = document.getElementById(b.getAttribute("data-copy"));
		if (!target || !navigator.clipboard) {
			return;
		}
		b.hidden = false;
		b.addEventListener("click", function () {
			navigator.clipboard.writeText(target.textContent).then(function () {
				b.textContent = "Copied";
			});
		});
	});
})();
