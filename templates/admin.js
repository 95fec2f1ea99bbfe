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

  // kind: '' (done), 'error' or 'warning' (applied, but not what was asked: an admit under hold).
  function show(text, kind) {
    notice.textContent = text;
    notice.className = kind ? 'notice ' + kind : 'notice';
  }
  if (notice.hasAttribute('data-warning')) show(notice.textContent, 'warning');

  // The store outage banner: shown at the first poll the store does not answer, or once the last
  // answer is older than two polls (a poll that hangs), and cleared by the next answer.
  var outage = document.getElementById('outage');
  var outageReason = document.getElementById('outage-reason');
  var figuresBox = document.getElementById('figures');
  var stateNote = document.getElementById('state-note');
  var queue = body.getAttribute('data-queue');
  var lastOk = Date.now();
  var lastAsOf = '';
  function showOutage(reason) {
    var text =
      'Queue ' + queue + ': ' + reason + '. This page asks again every ' + every / 1000 +
      ' seconds and clears this message as soon as the store answers.' +
      (lastAsOf ? ' The figures below are from ' + lastAsOf + '.' : '');
    if (outageReason.textContent !== text) outageReason.textContent = text;
    if (outage.hidden) outage.hidden = false;
    figuresBox.className = 'console-figures stale';
    // The state shown is the last one read: say so where it is read.
    stateNote.textContent = ' (last known)';
    liveState.textContent = 'the store is not answering; retrying.';
  }
  function clearOutage() {
    lastOk = Date.now();
    if (!outage.hidden) outage.hidden = true;
    figuresBox.className = 'console-figures';
    stateNote.textContent = '';
  }
  setInterval(function () {
    var silent = Date.now() - lastOk;
    if (silent > 2 * every) showOutage('no answer for ' + Math.round(silent / 1000) + ' seconds');
  }, 1000);

  // A select shows the state in force, until its operator picks another choice to send.
  var selects = document.querySelectorAll('select[data-in-force]');
  for (var s = 0; s < selects.length; s++) {
    selects[s].addEventListener('change', function (event) {
      event.currentTarget.setAttribute('data-picked', '');
    });
  }
  function showInForce(inForce) {
    for (var i = 0; i < selects.length; i++) {
      var select = selects[i];
      var key = select.name;
      if (typeof inForce[key] !== 'string') continue;
      select.setAttribute('data-in-force', inForce[key]);
      if (!select.hasAttribute('data-picked') && select.value !== inForce[key]) select.value = inForce[key];
    }
    if (typeof inForce.mode === 'string') {
      var parts = document.querySelectorAll('[data-mode]');
      for (var p = 0; p < parts.length; p++) parts[p].hidden = parts[p].getAttribute('data-mode') !== inForce.mode;
    }
  }
  function showLimits(state) {
    var fields = document.querySelectorAll('[data-current]');
    for (var f = 0; f < fields.length; f++) {
      var value = state[fields[f].getAttribute('data-current')];
      if (typeof value !== 'number') continue;
      var text = value === 0 && fields[f].name !== 'admit_per_period' ? 'no limit' : String(value);
      if (fields[f].placeholder !== text) fields[f].placeholder = text;
    }
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
    var audit = document.getElementById('audit');
    if (audit && typeof data.audit === 'string') audit.innerHTML = data.audit;
    var list = document.getElementById('queues');
    if (list && typeof data.queues === 'string') list.innerHTML = data.queues;
    var pause = document.getElementById('pause');
    if (data.state) {
      checkEpoch(data.state.epoch);
      showLimits(data.state);
    }
    if (data.in_force) showInForce(data.in_force);
    if (typeof figures.as_of === 'string') lastAsOf = figures.as_of;
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
    // A poll that hangs is given up after one poll's time: the banner says so after two.
    var controller = typeof AbortController === 'function' ? new AbortController() : null;
    var timer = controller && setTimeout(function () { controller.abort(); }, every);
    return fetch(liveUrl, { headers: { accept: 'application/json' }, credentials: 'same-origin', cache: 'no-store', signal: controller ? controller.signal : undefined })
      .then(function (r) {
        if (r.ok) return r.json();
        // The store did not answer: the room says what it answered, as the store-down page does.
        return r.json().then(
          function (json) {
            throw new Error(r.status === 503 && json.error ? json.error : 'the console answered ' + r.status);
          },
          function () {
            throw new Error('the console answered ' + r.status);
          }
        );
      })
      .then(function (data) {
        clearOutage();
        apply(data);
      })
      .catch(function (error) {
        var reason = error && error.name === 'AbortError' ? 'no answer within ' + every / 1000 + ' seconds' : error && error.message ? error.message : 'no answer';
        if (/^Failed to fetch|NetworkError|Load failed/.test(reason)) reason = 'no answer (' + reason + ')';
        showOutage(reason);
      })
      .then(function () {
        if (timer) clearTimeout(timer);
      });
  }
  function describe(result) {
    if (result.warning) return result.warning;
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
          show(describe(result), result.warning ? 'warning' : '');
          // Sent: the form's selects show the state in force again from the next poll.
          var picked = form.querySelectorAll('select[data-picked]');
          for (var k = 0; k < picked.length; k++) picked[k].removeAttribute('data-picked');
          var codes = document.getElementById('vip-codes');
          if (result.codes && codes) {
            codes.hidden = false;
            codes.textContent = result.codes.map(function (c) { return c.code + '  ' + c.link; }).join('\n');
          }
          if (form.querySelector('[name=confirm]')) form.reset();
          return refresh();
        })
        .catch(function (error) {
          show(error.message, 'error');
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
