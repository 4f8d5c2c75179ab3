// client/report.js - draws pilot report's page from its JSON data
//
// Embedded in the page by the build (client/report_assets.S).  Every
// text from a task (name, reason, tag) goes in with textContent or an
// attribute, never as markup.  Times in the data are seconds after the
// report's start (t0_ms); the summary is computed in C (report_stats.c).
"use strict";
(function () {
    var started = performance.now();
    var D = JSON.parse(document.getElementById("report-data").textContent);
    var S = D.summary;
    var NS = "http://www.w3.org/2000/svg";
    var app = document.getElementById("app");
    var T0 = D.t0_ms / 1000;

    function el(tag, attrs, text) {
        var e = document.createElement(tag);
        for (var k in attrs || {})
            e.setAttribute(k, attrs[k]);
        if (text !== undefined && text !== null)
            e.textContent = String(text);
        return e;
    }
    function sv(tag, attrs) {
        var e = document.createElementNS(NS, tag);
        for (var k in attrs || {})
            e.setAttribute(k, attrs[k]);
        return e;
    }
    function dur(s) {
        if (s === null || s === undefined || !isFinite(s))
            return "-";
        if (s < 1)
            return (s * 1000).toFixed(s < 0.01 ? 2 : 0) + " ms";
        if (s < 120)
            return s.toFixed(s < 10 ? 2 : 1) + " s";
        if (s < 7200)
            return (s / 60).toFixed(1) + " min";
        return (s / 3600).toFixed(2) + " h";
    }
    function clock(rel) {
        var d = new Date((T0 + rel) * 1000);
        return d.toLocaleString();
    }
    function color(i) {
        return "hsl(" + ((i * 137.508) % 360).toFixed(1) + ",62%,52%)";
    }
    function section(id, title) {
        var s = el("section", { id: id });
        s.appendChild(el("h2", {}, title));
        app.appendChild(s);
        return s;
    }
    function table(cls, head, rows) {
        var t = el("table", { "class": cls });
        var tr = el("tr");
        head.forEach(function (h) { tr.appendChild(el("th", {}, h)); });
        t.appendChild(el("thead")).appendChild(tr);
        var tb = t.appendChild(el("tbody"));
        rows.forEach(function (r) {
            var row = el("tr");
            r.forEach(function (c) { row.appendChild(el("td", {}, c)); });
            tb.appendChild(row);
        });
        return t;
    }

    // --- header ----------------------------------------------------------
    app.appendChild(el("h1", {}, D.title));
    var head = el("p", { "class": "meta" });
    var span = S.span ? S.span[1] - S.span[0] : 0;
    var states = Object.keys(S.states).map(function (k) {
        return k + " " + S.states[k];
    }).join(", ");
    head.textContent = S.tasks + " tasks (" + (states || "none") + "), " +
        S.ranks_run + " ranks run on " + D.nodes.length + " nodes (" +
        S.cores + " cores, " + S.gpus + " GPUs) over " + dur(span) +
        (S.span ? ", from " + clock(0) : "") + ".  Made " +
        new Date(D.made * 1000).toLocaleString() + ".";
    app.appendChild(head);

    // --- the timeline ----------------------------------------------------
    var tip = el("div", { id: "tip", "class": "tip" });
    document.body.appendChild(tip);
    var W = 1100, LW = 110, RM = 40;
    var nrows = D.rows.length;
    var RH = nrows ? Math.max(3, Math.min(16, Math.floor(640 / nrows))) : 16;
    var TSPAN = D.t1 > 0 ? D.t1 : 1;
    function x(t) { return LW + (t / TSPAN) * W; }

    var tl = section("timeline", D.detail
        ? "Timeline: one row per core or GPU, one bar per task rank"
        : "Timeline: busy fraction of each core and GPU over time " +
          "(aggregated: " + S.tasks + " tasks)");
    var H = nrows * RH + 24;
    var svg = sv("svg", { width: LW + W + RM, height: H,
                          "class": "tl", viewBox: "0 0 " + (LW + W + RM) +
                          " " + H });
    tl.appendChild(svg);
    var labels = sv("g", { "class": "labels" });
    svg.appendChild(labels);
    D.rows.forEach(function (r, i) {
        var node = D.nodes[r[0]].name;
        if (i % 2)
            svg.appendChild(sv("rect", { x: LW, y: i * RH, width: W,
                                         height: RH, "class": "stripe" }));
        if (RH >= 8) {
            var t = sv("text", { x: LW - 4, y: i * RH + RH - 2,
                                 "class": "rowlabel" });
            t.textContent = node + (r[1] ? " gpu" : " cpu") + r[2];
            labels.appendChild(t);
        }
    });
    // node boundaries
    var prev = -1;
    D.rows.forEach(function (r, i) {
        if (r[0] !== prev && i)
            svg.appendChild(sv("line", { x1: 0, x2: LW + W, y1: i * RH,
                                         y2: i * RH, "class": "nodeline" }));
        prev = r[0];
    });
    // time axis
    for (var k = 0; k <= 5; k++) {
        var tt = TSPAN * k / 5;
        var lab = sv("text", { x: x(tt), y: nrows * RH + 16,
                               "class": "axis" });
        lab.textContent = "+" + dur(tt);
        svg.appendChild(lab);
    }

    function showTip(ev, lines) {
        tip.textContent = "";
        lines.forEach(function (l) { tip.appendChild(el("div", {}, l)); });
        tip.style.display = "block";
        // on the cursor's left where the right edge would cut it
        var left = ev.pageX + 12;
        if (left + tip.offsetWidth > window.scrollX + window.innerWidth)
            left = Math.max(window.scrollX, ev.pageX - 12 - tip.offsetWidth);
        tip.style.left = left + "px";
        tip.style.top = (ev.pageY + 12) + "px";
    }
    function hideTip() { tip.style.display = "none"; }

    if (D.detail) {
        // filled before it joins the page: one insertion, not 100,000
        var bars = sv("g", { "class": "bars" });
        D.bars.forEach(function (b, i) {
            var t = D.tasks[b[0]];
            var end = b[4] === null ? TSPAN : b[4];
            var g = sv("g", { "class": "bar", "data-bar": i,
                              "data-task": t[0], "data-rank": b[2],
                              "data-attempt": b[1], fill: color(t[2]) });
            b[5].forEach(function (row) {
                g.appendChild(sv("rect", {
                    x: x(b[3]).toFixed(2), y: row * RH + 1,
                    width: Math.max(0.6, x(end) - x(b[3])).toFixed(2),
                    height: Math.max(1, RH - 2) }));
            });
            bars.appendChild(g);
        });
        svg.appendChild(bars);
        var barTip = function (ev, g) {
            var b = D.bars[+g.getAttribute("data-bar")], t = D.tasks[b[0]];
            var tags = Object.keys(t[17]).map(function (k) {
                return k + "=" + t[17][k];
            }).join(" ");
            showTip(ev, [
                "task " + t[0] + (t[1] !== null ? " " + t[1] : "") +
                    " (rank " + b[2] + ", attempt " + b[1] + ")",
                "state " + t[3] + (t[4] ? ": " + t[4] : ""),
                "ran " + dur((b[4] === null ? TSPAN : b[4]) - b[3]) +
                    " from " + clock(b[3]),
                "waited " + dur(t[6] === null ? null : t[6] - t[5]) +
                    " in the queue",
                t[8] + " ranks x " + t[9] + " cores, " + t[10] + " GPUs" +
                    (t[13] !== null ? ", max RSS " + t[13] + " kB" : "") +
                    (t[14] !== null ? ", CPU " + dur(t[14] + t[15]) : ""),
                tags ? "tags " + tags : ""
            ].filter(function (l) { return l; }));
        };
        svg.addEventListener("mousemove", function (ev) {
            var g = ev.target.closest ? ev.target.closest("g.bar") : null;
            if (!g)
                return hideTip();
            barTip(ev, g);
        });
        svg.addEventListener("mouseleave", hideTip);
        // report.html#task=ID: that task's first bar picked, its tip shown
        // (a link to one task; t1210 reads the tip from the DOM)
        var m = /^#task=([0-9]+)$/.exec(location.hash);
        var picked = m ? svg.querySelector("g.bar[data-task=\"" + m[1] +
                                           "\"]") : null;
        if (picked) {
            var rc = picked.getBoundingClientRect();
            picked.setAttribute("class", "bar picked");
            barTip({ pageX: rc.right + window.scrollX,
                     pageY: rc.top + window.scrollY }, picked);
        }
        // legend: the groups, in order of first use
        var leg = el("div", { "class": "legend" });
        D.groups.slice(0, 40).forEach(function (gname, i) {
            var item = el("span", { "class": "lg" });
            var sw = el("span", { "class": "sw" });
            sw.style.background = color(i);
            item.appendChild(sw);
            item.appendChild(document.createTextNode(gname));
            leg.appendChild(item);
        });
        if (D.groups.length > 40)
            leg.appendChild(el("span", { "class": "lg" },
                               "... " + (D.groups.length - 40) + " more"));
        tl.appendChild(leg);
    } else {
        // one canvas cell per row and bucket: hundreds of thousands of
        // them would make a slow SVG
        var nb = D.heat.rows.length ? D.heat.rows[0].length : 0;
        var cv = el("canvas", { "class": "heat", width: W,
                                height: nrows * RH,
                                "data-rows": nrows, "data-buckets": nb });
        cv.style.position = "absolute";
        cv.style.left = LW + "px";
        cv.style.top = "0px";
        var wrap = el("div", { "class": "heatwrap" });
        tl.replaceChild(wrap, svg);
        wrap.appendChild(svg);
        wrap.appendChild(cv);
        var cx = cv.getContext("2d"), cw = W / Math.max(1, nb);
        D.heat.rows.forEach(function (r, i) {
            for (var j = 0; j < r.length; j++) {
                if (!r[j])
                    continue;
                cx.fillStyle = "rgba(31,119,180," +
                    (0.15 + 0.85 * r[j] / 100).toFixed(3) + ")";
                cx.fillRect(j * cw, i * RH + 1, Math.ceil(cw), RH - 2);
            }
        });
        cv.addEventListener("mousemove", function (ev) {
            var rc = cv.getBoundingClientRect();
            var i = Math.floor((ev.clientY - rc.top) / RH);
            var j = Math.floor((ev.clientX - rc.left) / cw);
            var row = D.rows[i];
            if (!row || j < 0 || j >= nb)
                return hideTip();
            showTip(ev, [D.nodes[row[0]].name + (row[1] ? " gpu" : " cpu") +
                         row[2], "busy " + D.heat.rows[i][j] + "% from " +
                         clock(j * D.heat.dt) + " for " + dur(D.heat.dt)]);
        });
        cv.addEventListener("mouseleave", hideTip);
    }

    // --- utilisation -----------------------------------------------------
    var us = section("utilisation", "Utilisation over time");
    if (S.util) {
        var UH = 160, usvg0 = sv("svg", { width: LW + W + 10,
                                          height: UH + 24, "class": "util" });
        us.appendChild(usvg0);
        var usvg = usvg0.appendChild(sv("g",
                                        { transform: "translate(0,10)" }));
        [["cores", "ucores"], ["gpus", "ugpus"]].forEach(function (p) {
            var v = S.util[p[0]];
            if (!v.length || v[0] === null)
                return;
            var pts = [LW + "," + UH];
            v.forEach(function (f, i) {
                pts.push((LW + (i + 0.5) / v.length * W).toFixed(1) + "," +
                         (UH - f * UH).toFixed(1));
            });
            pts.push((LW + W) + "," + UH);
            usvg.appendChild(sv("polygon", { points: pts.join(" "),
                                             "class": p[1] }));
        });
        [0, 50, 100].forEach(function (pc) {
            var y = UH - pc / 100 * UH;
            usvg.appendChild(sv("line", { x1: LW, x2: LW + W, y1: y, y2: y,
                                          "class": "grid" }));
            var t = sv("text", { x: LW - 4, y: y + 4, "class": "rowlabel" });
            t.textContent = pc + "%";
            usvg.appendChild(t);
        });
        var key = el("p", { "class": "key" });
        key.appendChild(el("span", { "class": "kc" }, "cores busy"));
        if (S.gpus)
            key.appendChild(el("span", { "class": "kg" }, "GPUs busy"));
        us.appendChild(key);
    }

    // --- histograms ------------------------------------------------------
    function hist(parent, id, title, h) {
        var box = el("div", { "class": "histbox", id: id });
        box.appendChild(el("h3", {}, title));
        var HW = 520, HH = 150;
        var s = sv("svg", { width: HW + 20, height: HH + 30, "class": "hist" });
        var max = Math.max.apply(null, h.counts.concat([1]));
        var bw = HW / h.counts.length;
        h.counts.forEach(function (c, i) {
            var r = sv("rect", { "class": "hbar", x: 10 + i * bw,
                                 y: HH - c / max * HH, width: bw - 1,
                                 height: c / max * HH, "data-count": c });
            var t = sv("title");
            t.textContent = dur(h.edges[i]) + " to " + dur(h.edges[i + 1]) +
                ": " + c;
            r.appendChild(t);
            s.appendChild(r);
        });
        [0, h.counts.length].forEach(function (i) {
            var t = sv("text", { x: 10 + i * bw, y: HH + 16,
                                 "class": "haxis",
                                 style: "text-anchor:" +
                                     (i ? "end" : "start") });
            t.textContent = dur(h.edges[i]);
            s.appendChild(t);
        });
        box.appendChild(s);
        box.appendChild(el("p", { "class": "note" },
                           (h.log ? "logarithmic" : "linear") + " bins; " +
                           h.counts.reduce(function (a, b) { return a + b; },
                                           0) + " tasks"));
        parent.appendChild(box);
    }
    var hs = section("histograms", "Queue wait and run time");
    hist(hs, "wait-hist", "Queue wait (submit to start)", S.wait_hist);
    hist(hs, "run-hist", "Run time (start to end)", S.run_hist);

    // --- slowest, failures, tables ----------------------------------------
    section("slowest", "Slowest tasks").appendChild(table("slowest",
        ["id", "name", "state", "wall", "queue wait", "ranks"],
        S.slowest.map(function (t) {
            return [t.id, t.name === null ? "" : t.name, t.state, dur(t.wall),
                    dur(t.queue_wait), t.ranks];
        })));
    var fs = section("failures", "Failures by reason");
    if (S.failures.length)
        fs.appendChild(table("failures", ["reason", "tasks", "ids"],
            S.failures.map(function (f) {
                return [f.reason, f.count, f.ids.join(" ") +
                        (f.count > f.ids.length ? " ..." : "")];
            })));
    else
        fs.appendChild(el("p", {}, "No task failed."));
    function pct(v) { return v === null ? "-" : (v * 100).toFixed(1) + "%"; }
    function groupRows(g) {
        return g.map(function (r) {
            return [r.group, r.count, r.done, r.failed, dur(r.mean_wall),
                    dur(r.p95_wall), pct(r.cpu_eff)];
        });
    }
    var head7 = ["", "tasks", "done", "failed", "mean wall", "p95 wall",
                 "CPU efficiency"];
    section("by-name", "By name").appendChild(
        table("groups by-name", ["name"].concat(head7.slice(1)),
              groupRows(S.by_name)));
    var bt = section("by-tag", "By tag");
    if (S.by_tag.length)
        bt.appendChild(table("groups by-tag", ["tag"].concat(head7.slice(1)),
                             groupRows(S.by_tag)));
    else
        bt.appendChild(el("p", {}, "No task has tags."));
    document.body.setAttribute("data-rendered", "1");
    // ms from the start of the navigation to the page drawn: what
    // t1210 and a person timing a large report read
    document.body.setAttribute("data-render-ms",
                               Math.round(performance.now()));
    document.body.setAttribute("data-script-ms",
                               Math.round(performance.now() - started));
})();
