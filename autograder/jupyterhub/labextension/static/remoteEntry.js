/* "Check my work" for the course hub: a JupyterLab extension written by hand (no build step).
 *
 * JupyterLab loads a prebuilt extension as a module-federation container: it runs this file, calls
 * init(shareScope) with the packages it shares, then get('./extension') for the plugin. The plugin
 * puts a "Check my work" button on the toolbar of every notebook of an assignment (a path
 * <course>/<assignment>/<notebook>.ipynb, where nbgrader's Assignments tab fetches it). The
 * button saves the notebook, submits the assignment through nbgrader's own endpoint of the
 * student's server (the same as the Assignments tab's Submit), and opens the check's page from the
 * course's check service (/services/checks-<course>/assignments/<assignment>) beside the
 * notebook, in a frame that runs no script (sandboxed without allow-scripts). While the check waits
 * or runs, the page asks to be loaded again (<meta http-equiv="refresh">); a browser refuses that
 * in such a frame, so the extension reloads the frame for it, until the page no longer asks.
 * The panel opens once the service has seen the submission (its JSON API), not to show the check
 * before it; another click on the same assignment reuses the panel.
 */
(function () {
  'use strict';
  var NAME = 'attention-course-check';
  var shared = null;
  var panels = {};   // the open check panel of each course/assignment
  var WAIT_MS = 30000;   // the longest wait for the check service to see a submission

  function load(name) {
    var versions = shared && shared[name];
    if (!versions) {
      return Promise.reject(new Error(NAME + ': JupyterLab shares no ' + name));
    }
    var newest = Object.keys(versions).sort(function (a, b) {
      return a.localeCompare(b, undefined, { numeric: true });
    }).pop();
    return Promise.resolve(versions[newest].get()).then(function (factory) {
      return factory();
    });
  }

  function where(path) {
    var parts = String(path).split('/');
    if (parts.length < 3 || !/\.ipynb$/.test(parts[parts.length - 1])) {
      return null;
    }
    return { course: parts[parts.length - 3], assignment: parts[parts.length - 2] };
  }

  // Does for the frame what its sandbox refuses the page: a load again after the delay that the
  // page's <meta http-equiv="refresh"> asks for (the frame's document is of the hub's own origin).
  function followRefresh(widget, iframe) {
    var timer = null;
    iframe.addEventListener('load', function () {
      clearTimeout(timer);
      var doc = null;
      try {
        doc = iframe.contentDocument;
      } catch (error) {
        return;   // (not the check service's page: nothing to follow)
      }
      var meta = doc && doc.querySelector('meta[http-equiv="refresh" i]');
      if (!meta) {
        return;
      }
      var seconds = parseFloat(meta.getAttribute('content'));
      timer = setTimeout(function () {
        if (!widget.isDisposed) {
          iframe.contentWindow.location.reload();
        }
      }, (seconds >= 1 ? seconds : 2) * 1000);
    });
    widget.disposed.connect(function () { clearTimeout(timer); });
  }

  // The check service's answer about the student's newest check of the assignment ({state: null}
  // when there is none; null when the service did not answer). A GET signs the lab's session in
  // to the service (the hub's OAuth, redirects of the same origin); a POST also asks the service
  // to look at the exchange now.
  function newestCheck(api, method) {
    return fetch(api, { method: method, credentials: 'same-origin', headers: { Accept: 'application/json' } })
      .then(function (response) {
        return response.ok ? response.json() : null;
      })
      .catch(function () {
        return null;
      });
  }

  // Resolves once the service has the submission just made (its newest check is not the one of
  // ``before``), or after WAIT_MS: the page would otherwise show the check before it, done, and
  // never load again.
  function newSubmissionSeen(api, before) {
    var deadline = Date.now() + WAIT_MS;
    function poll() {
      return newestCheck(api, 'POST').then(function (answer) {
        if ((answer && answer.state !== null && answer.submitted !== before.submitted) || Date.now() > deadline) {
          return;
        }
        return new Promise(function (resolve) { setTimeout(resolve, 1000); }).then(poll);
      });
    }
    return before ? poll() : Promise.resolve();
  }

  function checkMyWork(app, lib, context) {
    var found = where(context.path);
    var settings = lib.services.ServerConnection.makeSettings();
    var hubPrefix = lib.coreutils.PageConfig.getOption('hubPrefix') || '/hub/';
    var base = hubPrefix.replace(/hub\/?$/, '');
    var service = base + 'services/checks-' + encodeURIComponent(found.course) + '/';
    var page = service + 'assignments/' + encodeURIComponent(found.assignment);
    var api = service + 'api/assignments/' + encodeURIComponent(found.assignment);
    var body = new URLSearchParams({ course_id: found.course, assignment_id: found.assignment });
    var before = null;
    return newestCheck(api, 'GET').then(function (answer) {
      before = answer;
      return context.save();
    }).then(function () {
      return lib.services.ServerConnection.makeRequest(
        lib.coreutils.URLExt.join(settings.baseUrl, 'assignments', 'submit'),
        { method: 'POST', body: body.toString(),
          headers: { 'Content-Type': 'application/x-www-form-urlencoded' } },
        settings);
    }).then(function (response) {
      return response.json().then(function (answer) {
        if (!response.ok || !answer.success) {
          throw new Error('the submission did not go through: ' + String(answer.value || response.status));
        }
      });
    }).then(function () {
      return newSubmissionSeen(api, before);
    }).then(function () {
      var key = found.course + '/' + found.assignment;
      var open = panels[key];
      if (open && !open.isDisposed) {
        open.content.node.querySelector('iframe').contentWindow.location.replace(page);
        app.shell.activateById(open.id);
        return;
      }
      var frame = new lib.apputils.IFrame({ sandbox: ['allow-same-origin'], referrerPolicy: 'no-referrer' });
      frame.url = page;
      var widget = new lib.apputils.MainAreaWidget({ content: frame });
      widget.id = NAME + '-' + found.course + '-' + found.assignment + '-' + Date.now();
      widget.title.label = 'Check: ' + found.assignment;
      widget.title.closable = true;
      followRefresh(widget, frame.node.querySelector('iframe'));
      panels[key] = widget;
      app.shell.add(widget, 'main', { mode: 'split-right' });
    }).catch(function (error) {
      return lib.apputils.showErrorMessage('Check my work', error);
    });
  }

  var plugin = {
    id: NAME + ':plugin',
    description: 'Check my work: submit and see the check on submit of this assignment.',
    autoStart: true,
    activate: function (app) {
      Promise.all([load('@jupyterlab/apputils'), load('@jupyterlab/services'), load('@jupyterlab/coreutils')])
        .then(function (modules) {
          var lib = { apputils: modules[0], services: modules[1], coreutils: modules[2] };
          app.docRegistry.addWidgetExtension('Notebook', {
            createNew: function (panel, context) {
              if (!where(context.path)) {
                return undefined;
              }
              var button = new lib.apputils.ToolbarButton({
                className: NAME + '-button',
                label: 'Check my work',
                tooltip: 'Submit this assignment and see its check (feedback, not your grade)',
                onClick: function () { checkMyWork(app, lib, context); }
              });
              // Near the toolbar's start: a narrow notebook (beside the check's panel, say) moves
              // the toolbar's last items into its "more" menu.
              if (!panel.toolbar.insertAfter('save', NAME, button)) {
                panel.toolbar.insertItem(0, NAME, button);
              }
              return button;
            }
          });
        })
        .catch(function (error) {
          console.error(NAME + ': not loaded', error);
        });
    }
  };

  window._JUPYTERLAB = window._JUPYTERLAB || {};
  window._JUPYTERLAB[NAME] = {
    init: function (scope) {
      shared = scope;
      return Promise.resolve();
    },
    get: function (module) {
      if (module !== './extension') {
        return Promise.reject(new Error(NAME + ' has no module ' + module));
      }
      return Promise.resolve(function () {
        return { __esModule: true, default: plugin };
      });
    }
  };
})();
