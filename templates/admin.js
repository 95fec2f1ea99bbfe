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
  var resetElsewhere = document.getElementById('reset-elsewhere');
  // The epoch the reset form sends: the one this page was served with, or the one its own reset
  // made. A live poll never changes it, so that a reset by someone else since is refused (409),
  // not repeated over the visitors who joined after it.
  var epochField = document.getElementById('reset-epoch');
  var resetting = false;

  function show(text, isError) {
    notice.textContent = text;
    notice.className = isError ? 'notice error' : 'notice';
  }
  function utc(ms) {
    return new Date(ms).toISOString().slice(0, 19).replace('T', ' ') + ' UTC';
  }
  // Says so when the queue's epoch is not the one this page's reset form names: someone reset it
  // since (another console, the API), and resetting from here would need a reload first.
  function checkEpoch(epoch) {
    if (!epochField || !resetElsewhere || resetting || typeof epoch !== 'number') return;
    var text =
      String(epoch) === epochField.value
        ? ''
        : 'This queue was reset by someone else at ' + utc(epoch) + ', after this page was loaded. ' +
          'The figures here are current, but the reset form still names the earlier state: reload the page before resetting again.';
    if (resetElsewhere.textContent !== text) resetElsewhere.textContent = text;
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
    if (data.state) checkEpoch(data.state.epoch);
    // A fresh form token with every poll: a console left open for hours can still act.
    if (typeof data.csrf === 'string') {
      var tokens = document.querySelectorAll('input[name=csrf]');
      for (var t = 0; t < tokens.length; t++) tokens[t].value = data.csrf;
    }
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
    if (typeof result.admitted === 'number') {
      var visitors = result.admitted + (result.admitted === 1 ? ' visitor' : ' visitors') + ' in.';
      return result.replayed ? 'Already done: this request let ' + visitors : 'Let ' + visitors;
    }
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
      // One idempotency key per submission: a double submit admits once. Whenever the outcome is
      // unknown (no answer, an answer that is not ours, any 5xx) the key is kept, so that
      // submitting again is a safe retry: the room answers what the first did, or does it now.
      var key = form.querySelector('[data-idempotency-key]');
      if (key && !key.value) key.value = newKey();
      var keep = true;
      var isReset = form.contains(epochField);
      if (isReset) resetting = true;
      var lost = function (why) {
        return new Error(
          'The answer was lost (' + why + '): the request may have been applied. ' +
            (key ? 'Pressing the button again is safe: it sends the same key, so it is applied at most once.' : 'Check the figures before trying again.')
        );
      };
      fetch(form.action, {
        method: 'POST',
        headers: { accept: 'application/json', 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams(new FormData(form)).toString(),
        credentials: 'same-origin',
      })
        .then(
          function (r) {
            return r.json().then(
              function (json) {
                // A 2xx was applied and a 4xx changed nothing: either way the next press is a new request.
                if (r.status < 500) keep = false;
                if (!r.ok) throw new Error(json.error || 'the request failed (' + r.status + ')');
                return json;
              },
              function () {
                // Not our JSON: a proxy's error page, or a body cut short.
                throw lost('status ' + r.status + ', not an answer from the waiting room');
              }
            );
          },
          function (error) {
            throw lost(error.message);
          }
        )
        .then(function (result) {
          if (isReset && result.reset === true && typeof result.epoch === 'number' && epochField) {
            // Our own reset: the form now names the epoch it made.
            epochField.value = String(result.epoch);
          }
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
          if (isReset) resetting = false;
          button.disabled = false;
        });
    });
  }
  refresh();
  setInterval(refresh, every);
})();
