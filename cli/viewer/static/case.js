// evalledger view: draws a case page from the JSON data block the server put in it (the case's
// events as the ledger stored them, and its result as the view index keeps it). Every value from
// a benchmark or a judge is set with textContent (never innerHTML), so it stays text; links are
// built from seqs only. Runs on load and again after a live update swaps the page's <main>.
(function () {
  "use strict";
  var SUMMARY_KEYS = ["attribute", "similarity", "attempt", "threshold", "field", "trait", "mode", "score",
    "claim_id", "verdict", "auto_failed", "risk", "high", "low", "credit_score", "zone", "stage", "reason", "author"];
  var ROLE_STEPS = {
    extract_excerpts: ["excerpt.extracted", "excerpt.retried", "excerpt.missing"],
    assess_risk: ["risk.assessed"], search: ["risk.assessed"], reason: ["reasoning.generated"],
    parse: ["answer.parsed"], score_trait: ["trait.scored", "trait.auto_failed"], score_claims: ["claim.scored"],
    decompose: ["facts.decomposed"], check_facts: ["facts.checked"], check_logic: ["logic.checked"],
    detect_abstention: ["abstention.detected"]
  };
  var COMPUTED = ["field.verified", "case.auto_failed", "case.judged", "credit.scored"];

  function isObj(v) { return v !== null && typeof v === "object" && !Array.isArray(v); }
  function obj(v) { return isObj(v) ? v : {}; }
  function str(v) { return v === null || v === undefined ? "" : (typeof v === "object" ? JSON.stringify(v) : String(v)); }
  function sorted(v) {
    if (Array.isArray(v)) { return v.map(sorted); }
    if (!isObj(v)) { return v; }
    var out = {};
    Object.keys(v).sort().forEach(function (k) { out[k] = sorted(v[k]); });
    return out;
  }
  function asJson(v) { return v === undefined ? "null" : JSON.stringify(sorted(v), null, 2); }

  // el("p", {class: "x"}, child, "text", ...): an element; strings become text nodes.
  function el(tag, attrs) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    for (var i = 2; i < arguments.length; i++) { add(node, arguments[i]); }
    return node;
  }
  function add(node, child) {
    if (child === null || child === undefined || child === false) { return; }
    if (Array.isArray(child)) { child.forEach(function (c) { add(node, c); }); return; }
    node.appendChild(typeof child === "object" ? child : document.createTextNode(String(child)));
  }
  function pre(v, css) { return el("pre", css ? {class: css} : {}, asJson(v)); }
  function details(label, content) { return el("details", {}, el("summary", {}, label), content); }
  function seqLink(seq) { return el("a", {href: "#seq-" + seq}, "seq " + seq); }
  function badge(verdict) {
    var css = verdict === "pass" || verdict === "fail" ? verdict : "none";
    return el("span", {class: "badge " + css}, verdict === null || verdict === undefined ? "-" : str(verdict));
  }
  function table(headers, rows, css) {
    return el("table", {class: css || ""},
      el("thead", {}, el("tr", {}, headers.map(function (h) { return el("th", {}, h); }))),
      el("tbody", {}, rows.map(function (row) {
        return el("tr", {}, row.map(function (cell) { return el("td", {}, cell); }));
      })));
  }

  // --- the response with its quotes highlighted ---------------------------------------------------
  function quotes(events) {
    var out = [];
    events.forEach(function (e) {
      var d = obj(e.data);
      if (e.type === "excerpt.extracted") { out.push([str(d.text), "excerpt", d.similarity]); }
      if (e.type === "excerpt.retried" || e.type === "excerpt.missing") {
        (d.failed || []).forEach(function (f) { if (isObj(f)) { out.push([str(f.text), "failed-quote", f.similarity]); } });
      }
    });
    return out;
  }
  // Non-overlapping spans of the quotes found in text (first match, exact then case-insensitive).
  function spans(text, qs) {
    var lowered = text.toLowerCase(), found = [];
    qs.forEach(function (q) {
      if (!q[0] || !q[0].trim()) { return; }
      var start = text.indexOf(q[0]);
      if (start < 0) { start = lowered.indexOf(q[0].toLowerCase()); }
      if (start < 0) { return; }
      var end = start + q[0].length;
      if (found.every(function (s) { return end <= s[0] || start >= s[1]; })) {
        found.push([start, end, q[1], "similarity " + str(q[2])]);
      }
    });
    return found.sort(function (a, b) { return a[0] - b[0]; });
  }
  function highlighted(text, qs) {
    var node = el("pre", {class: "response", id: "response"}), at = 0;
    spans(text, qs).forEach(function (s) {
      add(node, text.slice(at, s[0]));
      add(node, el("mark", {class: s[2], title: s[3]}, text.slice(s[0], s[1])));
      at = s[1];
    });
    add(node, text.slice(at));
    return node;
  }

  // --- judge calls behind each step (as projections.history ties them) ---------------------------
  function payloadOf(call) {
    var request = obj(call.data.request);
    return obj(request.payload);
  }
  function names(payload, key) {
    return (payload[key] || []).filter(isObj).map(function (i) { return str(i.name); });
  }
  function backs(call, step) {
    var role = call.data.role, payload = payloadOf(call), d = obj(step.data);
    if ((ROLE_STEPS[role] || []).indexOf(step.type) < 0) { return false; }
    if (role === "extract_excerpts") {
      var attrs = names(payload, "attributes");
      if (attrs.length && attrs.indexOf(str(d.attribute)) < 0) { return false; }
      if (payload.subject && d.subject && payload.subject !== d.subject) { return false; }
      var stepAttempt = call.data.step_attempt;
      if (step.type !== "excerpt.missing" && stepAttempt !== null && stepAttempt !== undefined &&
          d.attempt !== null && d.attempt !== undefined) { return stepAttempt === d.attempt; }
      return true;
    }
    if (role === "assess_risk" || role === "search") {
      return payload.attribute === null || payload.attribute === undefined || payload.attribute === d.attribute;
    }
    if (role === "score_trait") {
      return !isObj(payload.trait) || payload.trait.name === d.trait;
    }
    return true;
  }
  function callMode(d) { return d.backend === "replay" ? "replayed" : (d.source_event ? "cached" : "live"); }
  function tokens(d) {
    var u = obj(d.usage);
    return u.total_tokens || ((u.prompt_tokens || 0) + (u.completion_tokens || 0));
  }
  function callBlock(call) {
    var d = obj(call.data), request = obj(d.request), feedback = obj(request.payload).feedback;
    return el("div", {class: "call", id: "seq-" + call.seq},
      el("p", {}, "judge call ", seqLink(call.seq),
        ": " + [str(d.role), str(d.backend) + "/" + str(d.model), "attempt " + str(d.attempt), callMode(d),
          "tokens " + str(tokens(d)), "latency " + str(d.latency_ms) + " ms"].join(" · ") +
        (d.error ? " · error " + str(d.error) : "")),
      feedback ? el("p", {class: "feedback"}, "retry feedback: " + asJson(feedback)) : null,
      details("request", pre(d.request || null)),
      details("reply", [pre(d.reply === undefined ? null : d.reply), d.raw_reply ? el("pre", {}, str(d.raw_reply)) : null]));
  }

  // --- the stage timeline --------------------------------------------------------------------------
  function eventBody(e) {
    var d = obj(e.data), out = [];
    var summary = SUMMARY_KEYS.filter(function (k) { return k in d; })
      .map(function (k) { return k + " " + str(d[k]); }).join(" · ");
    if (summary) { out.push(el("p", {class: "summary"}, summary)); }
    if (e.type === "excerpt.extracted") {
      out.push(el("p", {}, "quote ", el("mark", {class: "excerpt"}, str(d.text)), " similarity " + str(d.similarity)));
    }
    if (e.type === "excerpt.retried" || e.type === "excerpt.missing") {
      (d.failed || []).filter(isObj).forEach(function (f) {
        out.push(el("p", {class: "failed"}, "failed quote ", el("mark", {class: "failed-quote"}, str(f.text)),
          " similarity " + str(f.similarity) + " (threshold " + str(d.threshold) + ")"));
      });
    }
    if (e.type === "note.added") { out.push(el("blockquote", {class: "note"}, str(d.text))); }
    out.push(details("payload", pre(e.data)));
    return out;
  }
  function timeline(events) {
    var calls = events.filter(function (e) { return e.type === "judge.called"; });
    return el("ol", {class: "timeline"}, events.filter(function (e) { return e.type !== "judge.called"; }).map(function (e) {
      var meta = obj(e.meta);
      var behind = calls.filter(function (c) { return backs(c, e); }).map(callBlock);
      if (COMPUTED.indexOf(e.type) >= 0) { behind.push(el("p", {class: "computed"}, "computed by code, no judge call")); }
      return el("li", {class: "event " + e.type.replace(/\./g, "-"), id: "seq-" + e.seq},
        el("p", {class: "event-head"}, seqLink(e.seq), " ", el("b", {}, e.type),
          " · " + (str(meta.stage) || "-") + " · " + str(meta.recorded_at) + " · ",
          el("code", {}, str(e.hash).slice(0, 12)),
          e.cause ? [" · caused by ", seqLink(e.cause)] : null),
        eventBody(e), behind);
    }));
  }

  // --- the result from the read models -------------------------------------------------------------
  function entries(o) { return Object.keys(obj(o)).sort().map(function (k) { return [k, o[k]]; }); }
  function resultSections(r) {
    if (!r) { return el("p", {}, "No read model for this case yet."); }
    var out = [];
    var fields = entries(r.fields);
    if (fields.length) {
      out.push(el("h2", {}, "Fields"), table(["field", "primitive", "expected", "extracted", "verdict"],
        fields.map(function (kv) {
          var f = obj(kv[1]);
          return [kv[0], asJson(f.primitive), asJson(f.expected), asJson(f.extracted),
            f.passed === true ? "pass" : (f.passed === false ? "fail" : "undecided")];
        }), "fields"));
    }
    var risk = entries(r.risk);
    if (risk.length) {
      out.push(el("h2", {}, "Risk"), table(["attribute", "assessment"],
        risk.map(function (kv) { return [kv[0], pre(kv[1])]; })));
    }
    if (r.reasoning) { out.push(el("h2", {}, "Reasoning"), pre(r.reasoning, "reasoning")); }
    var traits = entries(r.traits), autoFailed = r.traits_auto_failed || [];
    if (traits.length || autoFailed.length) {
      out.push(el("h2", {}, "Rubric traits"), table(["trait", "mode", "score", "reasoning"],
        traits.map(function (kv) { var t = obj(kv[1]); return [kv[0], str(t.mode), str(t.score), str(t.reasoning)]; })
          .concat(autoFailed.map(function (n) { return [str(n), "", "auto-failed", ""]; })), "traits"));
    }
    if (r.claims && r.claims.length) {
      out.push(el("h2", {}, "Reconstruction claims"), table(["claim", "type", "score", "justification", "evidence"],
        r.claims.map(function (c) {
          c = obj(c);
          return [str(c.claim_id), str(c.claim_type), str(c.score), str(c.justification),
            (c.evidence_refs || []).map(str).join(", ")];
        }), "claims"));
    }
    if (isObj(r.audit)) {
      var a = r.audit, credit = obj(a.credit);
      var errors = (a.facts_errors || []).concat(a.logic_errors || []).filter(isObj)
        .sort(function (x, y) { return str(x.severity) < str(y.severity) ? -1 : (str(x.severity) > str(y.severity) ? 1 : 0); });
      out.push(el("h2", {}, "Audit"), el("p", {}, "credit score " + str(credit.credit_score) + " zone " + str(credit.zone) +
        " (expected " + str(a.expected_credit_score) + " " + str(a.expected_zone) + ")"),
        table(["severity", "level", "detail"], errors.map(function (e) {
          return [str(e.severity), str(e.level), str(e.detail)];
        }), "errors"));
    }
    if (r.failures && r.failures.length) {
      out.push(el("h2", {}, "Failed stages"), table(["stage", "reason"],
        r.failures.map(function (f) { return [str(f.stage), str(f.reason)]; })));
    }
    return out;
  }
  function reviews(events, r) {
    var rows = events.filter(function (e) { return e.type === "note.added" || e.type === "verdict.overridden"; })
      .map(function (e) {
        var d = obj(e.data);
        var what = e.type === "verdict.overridden" ? ["override → ", badge(d.verdict), " (" + str(d.reason) + ")"]
          : "note: " + str(d.text);
        return [seqLink(e.seq), str(d.author) || "anonymous", what];
      });
    r = r || {};
    return [el("h2", {}, "Notes and overrides"),
      el("p", {}, "original verdict ", badge(r.original_verdict), " · verdict in force ", badge(r.verdict)),
      table(["event", "author", "what"], rows, "reviews")];
  }
  function truthTable(question) {
    var fields = (obj(question.template).fields || []).filter(isObj);
    if (!fields.length) { return null; }
    return table(["field", "type", "ground truth", "verified with"], fields.map(function (f) {
      return [str(f.name), str(f.type), asJson(f.ground_truth), asJson(f.verify_with)];
    }), "truth");
  }

  function render() {
    var block = document.getElementById("case-data"), root = document.getElementById("case-root");
    if (!block || !root) { return; }
    var doc = JSON.parse(block.textContent), events = doc.events, r = doc.result;
    var opened = events.filter(function (e) { return e.type === "case.opened"; })[0];
    var d = obj(opened ? opened.data : null), question = obj(d.question), truth = {};
    Object.keys(question).forEach(function (k) { if (k !== "question" && k !== "id") { truth[k] = question[k]; } });
    var response = typeof d.response === "string" ? highlighted(d.response, quotes(events))
      : el("pre", {class: "response", id: "response"}, asJson(d.response === undefined ? null : d.response));
    root.replaceChildren(
      el("p", {class: "meta"}, ["benchmark " + str(d.benchmark_name || d.benchmark), "model " + str(d.model),
        "question " + str(d.question_id), "kind " + str(d.kind), "status " + str((r || {}).status)].join(" · ") +
        " · verdict ", badge((r || {}).verdict)),
      el("h2", {}, "Question"), el("pre", {class: "question"}, str(question.question)),
      el("h2", {}, "Response"), response,
      el("h2", {}, "Ground truth"), truthTable(question) || "",
      details("the whole question (template, rubric, expected values)", pre(truth, "truth")));
    add(root, resultSections(r));
    add(root, reviews(events, r));
    add(root, [el("h2", {}, "Stage timeline"), timeline(events)]);
    document.body.setAttribute("data-case-drawn", doc.case_id);
    if (window.location.hash) {                       // a link to one event: scroll to it once drawn
      var target = document.getElementById(window.location.hash.slice(1));
      if (target) { target.scrollIntoView(); }
    }
  }
  document.addEventListener("evalledger:swapped", render);
  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", render); } else { render(); }
})();
