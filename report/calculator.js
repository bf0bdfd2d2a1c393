/* Interactive GRPO / Dr.GRPO advantage calculator (no network, no innerHTML).
 * GRPO:    A_i = (r_i - mean(r)) / (std(r) + eps), sample std (ddof = 1), eps = 1e-4
 * Dr.GRPO: A_i =  r_i - mean(r)
 */
(function () {
  "use strict";
  var EPS = 1e-4;

  function parseRewards(text) {
    var parts = text.split(/[\s,]+/).filter(function (p) { return p.length > 0; });
    var values = [];
    for (var i = 0; i < parts.length; i++) {
      var v = Number(parts[i]);
      if (!isFinite(v)) { return { values: [], error: "not a number: " + parts[i] }; }
      values.push(v);
    }
    if (values.length < 2) { return { values: values, error: "type at least 2 rewards (a group of G >= 2)" }; }
    return { values: values, error: null };
  }

  function mean(xs) {
    return xs.reduce(function (a, b) { return a + b; }, 0) / xs.length;
  }

  function sampleStd(xs, m) {
    var ss = xs.reduce(function (a, x) { return a + (x - m) * (x - m); }, 0);
    return Math.sqrt(ss / (xs.length - 1));
  }

  function advantages(rewards, divideByStd) {
    var m = mean(rewards), s = sampleStd(rewards, m);
    var allEqual = rewards.every(function (r) { return r === rewards[0]; });
    var adv = rewards.map(function (r) {
      if (allEqual) { return 0; }
      return divideByStd ? (r - m) / (s + EPS) : r - m;
    });
    return { mean: m, std: allEqual ? 0 : s, adv: adv, allEqual: allEqual };
  }

  // Two decimals as the report's tables print them (Python's format: a tie such as -0.125 goes to the even digit,
  // -0.12; toFixed would round it away from zero, -0.13). A double's expansion to 20 decimals shows an exact tie.
  function fixed2(x) {
    var exact = Math.abs(x).toFixed(20), cut = exact.slice(0, exact.indexOf(".") + 3);
    var tie = /^50*$/.test(exact.slice(cut.length)) && Number(cut.slice(-1)) % 2 === 0;
    return (x < 0 ? "-" : "") + (tie ? cut : Math.abs(x).toFixed(2));
  }

  function signed(x) {
    var text = fixed2(x);
    if (Number(text) === 0) { return "0.00"; }
    return x > 0 ? "+" + text : text;
  }

  function cell(tag, text, className) {
    var el = document.createElement(tag);
    el.textContent = text;
    if (className) { el.className = className; }
    return el;
  }

  function render() {
    var input = document.getElementById("calc-rewards");
    var divide = document.getElementById("calc-divide-std").checked;
    var body = document.querySelector("#calc-output tbody");
    var message = document.getElementById("calc-message");
    var stats = document.getElementById("calc-stats");
    var parsed = parseRewards(input.value);
    while (body.firstChild) { body.removeChild(body.firstChild); }
    message.textContent = parsed.error || "";
    stats.textContent = "";
    if (parsed.error) { return; }
    var result = advantages(parsed.values, divide);
    stats.textContent = "G = " + parsed.values.length + ", mean = " + result.mean.toFixed(3) +
      ", std (ddof=1) = " + result.std.toFixed(3) + (divide ? ", A = (r - mean) / (std + 1e-4)" : ", A = r - mean (Dr.GRPO)");
    if (result.allEqual) { message.textContent = "all rewards equal: this group teaches nothing"; }
    parsed.values.forEach(function (r, i) {
      var row = document.createElement("tr");
      var a = result.adv[i];
      row.appendChild(cell("td", String(i + 1)));
      row.appendChild(cell("td", String(r), "reward"));
      row.appendChild(cell("td", signed(a), "adv" + (Number(fixed2(a)) > 0 ? " pos" : Number(fixed2(a)) < 0 ? " neg" : "")));
      body.appendChild(row);
    });
  }

  // A stored group's "Load into the calculator" button: its rewards, and its run's rule (GRPO divides by the std).
  Array.prototype.forEach.call(document.querySelectorAll(".calc-load"), function (button) {
    button.addEventListener("click", function () {
      document.getElementById("calc-rewards").value = button.getAttribute("data-rewards");
      document.getElementById("calc-divide-std").checked = button.getAttribute("data-divide") === "true";
      render();
      document.getElementById("calculator").scrollIntoView();
    });
  });
  // A link into the folded appendix opens the part it lands in (its own <details>, or the one around it).
  function openTarget() {
    var target = location.hash && document.getElementById(decodeURIComponent(location.hash.slice(1)));
    if (!target) { return; }
    var own = target.querySelector(":scope > details");
    for (var d = own || target.closest("details"); d; d = d.parentElement && d.parentElement.closest("details")) {
      d.open = true;
    }
    target.scrollIntoView();
  }
  window.addEventListener("hashchange", openTarget);
  Array.prototype.forEach.call(document.querySelectorAll('a[href^="#"]'), function (link) {
    link.addEventListener("click", function () { setTimeout(openTarget, 0); });
  });
  openTarget();
  document.getElementById("calc-rewards").addEventListener("input", render);
  document.getElementById("calc-divide-std").addEventListener("change", render);
  render();
})();
