// The admin console's live figures and in-place controls. Without it the page still works: forms
// post and come back with a notice, and a reload shows fresh figures.
(function () {
  'use strict';
  var body = document.body;
  var liveUrl = body.getAttribute('data-live');
  var every = Math.max(2, Number(body.getAttribute('data-every')) || 2) * 1000;
  // The page for a store that does not answer: ask in the background, and show the console (a
  // reload) only once the store answers, not every few seconds under the reader's eyes.
  if (body.hasAttribute('data-store-down')) {
    setInterval(function () {
      fetch(liveUrl, { headers: { accept: 'application/json' }, credentials: 'same-origin', cache: 'no-store' }).then(
        function (r) {
          if (r.ok) location.reload();
        },
        function () {
          // Not answered at all: the next try says more.
        }
      );
    }, every);
    return;
  }
  var notice = document.getElementById('notice');
  var liveState = document.getElementById('live-state');

  function show(text, isError) {
    notice.textContent = text;
    notice.className = isError ? 'notice error' : 'notice';
  }
  function apply(data) {
    var figures = data.figures || {};
    Object.keys(figures).forEach(function (k) {
      var nodes = document.querySelectorAll('[data-figure="' + k + '"]');
      for (var i = 0; i < nodes.length; i++) if (nodes[i].textContent !== figures[k]) nodes[i].textContent = figures[k];
    });
    // The active tile is a number, or words in rate mode (set from here, the mode can change).
    var active = document.querySelector('[data-figure="active"]');
    if (active && typeof figures.active === 'string') active.className = /^[0-9]/.test(figures.active) ? '' : 'text';
    if (typeof data.chart === 'string') document.getElementById('chart').innerHTML = data.chart;
    var list = document.getElementById('queues');
    if (list && typeof data.queues === 'string') list.innerHTML = data.queues;
    var pause = document.getElementById('pause');
    // A reset names the epoch it expects: keep it current, so that only a reset by someone else is refused.
    var epoch = document.getElementById('reset-epoch');
    if (epoch && data.state && typeof data.state.epoch === 'number') epoch.value = String(data.state.epoch);
    if (pause && data.pause_label) {
      pause.textContent = data.pause_label;
      document.getElementById('pause-value').value = data.pause_value;
    }
    liveState.textContent = 'updating every ' + every / 1000 + ' seconds.';
  }
  function refresh() {
    return fetch(liveUrl, { headers: { accept: 'application/json' }, credentials: 'same-origin', cache: 'no-store' })
      .then(function (r) {
        return r.ok ? r.json() : Promise.reject(new Error('status ' + r.status));
      })
      .then(apply)
      .catch(function () {
        liveState.textContent = 'could not update the figures just now; retrying.';
      });
  }
  function describe(result) {
    if (result.notice) return result.notice;
    if (typeof result.admitted === 'number') return 'Let ' + result.admitted + (result.admitted === 1 ? ' visitor' : ' visitors') + ' in.';
    if (result.changed) return result.changed;
    return 'Done.';
  }
  function newKey() {
    if (window.crypto && typeof window.crypto.randomUUID === 'function') return window.crypto.randomUUID();
    return Date.now().toString(36) + '-' + Math.random().toString(36).slice(2);
  }
  var forms = document.querySelectorAll('form[data-live-form]');
  for (var i = 0; i < forms.length; i++) {
    forms[i].addEventListener('submit', function (event) {
      var form = event.currentTarget;
      event.preventDefault();
      var question = form.getAttribute('data-confirm');
      if (question && !window.confirm(question)) return;
      var button = form.querySelector('button');
      button.disabled = true;
      // One idempotency key per submission: a double submit admits once. After a 503 (unknown
      // whether it was applied) the key is kept, so that submitting again is a safe retry.
      var key = form.querySelector('[data-idempotency-key]');
      if (key && !key.value) key.value = newKey();
      var keep = false;
      fetch(form.action, {
        method: 'POST',
        headers: { accept: 'application/json', 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams(new FormData(form)).toString(),
        credentials: 'same-origin',
      })
        .then(function (r) {
          return r.json().then(function (json) {
            keep = r.status === 503;
            if (!r.ok) throw new Error(json.error || 'the request failed (' + r.status + ')');
            return json;
          });
        })
        .then(function (result) {
          show(describe(result), false);
          var codes = document.getElementById('vip-codes');
          if (result.codes && codes) {
            codes.hidden = false;
            codes.textContent = result.codes.map(function (c) { return c.code + '  ' + c.link; }).join('\n');
          }
          if (form.querySelector('[name=confirm]')) form.reset();
          return refresh();
        })
        .catch(function (error) {
          show(error.message, true);
        })
        .then(function () {
          if (key && !keep) key.value = '';
          button.disabled = false;
        });
    });
  }
  refresh();
  setInterval(refresh, every);
})();
