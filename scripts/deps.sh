#!/usr/bin/env bash
# Install, with apt-get, whatever of pairkit's build and test dependencies is
# missing on a Debian 12 machine. Run as root (or with sudo available).
set -euo pipefail
packages=(
  build-essential cmake pkg-config            # compiler and build
  libplplot-dev plplot-driver-cairo           # PNG plots
  libcfitsio-dev                              # FITS catalogs, UVFITS, FITS images
  libzip-dev zlib1g-dev                       # .npz visibilities, gzip-compressed FITS
  python3 python3-numpy python3-pytest        # the Python module and its tests
  openmpi-bin libopenmpi-dev                  # mpirun -np K pairkit ...
  clang-format-14                             # the layout check of the tests (.clang-format)
  locales                                     # a decimal-comma locale for the tests of numbers in text
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "pairkit: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
