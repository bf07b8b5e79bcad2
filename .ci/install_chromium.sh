#!/usr/bin/env bash
# Chromium for tests/render/test_html_browser.py (report.html in a real headless browser).
# Never fatal: without Chromium that test skips and says why.
if [ -x /usr/bin/chromium ] || command -v chromium >/dev/null 2>&1; then
  exit 0
fi
if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = "0" ]; then
  echo "installing chromium for the browser test"
  (apt-get update && apt-get install -y chromium) >/dev/null 2>&1 \
    || echo "warning: could not install chromium; tests/render/test_html_browser.py will skip"
else
  echo "warning: chromium missing and apt-get unavailable (or not root); tests/render/test_html_browser.py will skip"
fi
exit 0
