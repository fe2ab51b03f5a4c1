#!/usr/bin/env bash
# The Debian tools the tests use, installed before they start (`make test` runs this first, so the two test
# workers never both run apt-get):
#   pdflatex + booktabs/pdflscape (Debian's TeX)  compiles the report's LaTeX tables (tests/test_latex.py)
#   chromium                                     renders the report headless (tests/test_browser.py)
#   the Slurm daemons                             the local cluster (scripts/local-slurm.sh install)
# Each is installed only when missing, and only where possible (apt-get as root); otherwise the tests that
# need it skip and say why. Idempotent; never fails the build.
set -uo pipefail
cd "$(dirname "$0")/.."

can_install() { [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; }

install() { # install WHAT APT-ARGS...: one apt-get install, its last lines shown only when it fails
    local what=$1 log
    shift
    echo "make: installing $what for the tests"
    log=$( { apt-get install -y -qq -o DPkg::Lock::Timeout=300 "$@"; } 2>&1 ) ||
        echo "make: could not install $what: $(tail -n 3 <<<"$log")"
}

tex_ready() { command -v pdflatex && kpsewhich booktabs.sty pdflscape.sty; } >/dev/null 2>&1

if tex_ready && command -v chromium >/dev/null && [[ -z $(scripts/local-slurm.sh missing) ]]; then
    exit 0
fi
if ! can_install; then
    echo "make: pdflatex, chromium or the Slurm packages are missing and cannot be installed here" \
        "(needs apt-get as root): the tests that need them will skip"
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null 2>&1 || echo "make: apt-get update failed"
tex_ready || install "TeX (texlive-latex-base, texlive-latex-recommended)" --no-install-recommends \
    texlive-latex-base texlive-latex-recommended
command -v chromium >/dev/null || install chromium chromium  # with its recommended fonts
scripts/local-slurm.sh install || echo "make: the Slurm packages could not be installed"
exit 0
