# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Helpers the host tests share (``from conftest import ...``): running a module the way Ansible does, and a
headless chromium with the PNG reading its screenshots need."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zlib

import pytest

# tests/tools: the helpers the suites share (proctools.py), also where tests/run-all.sh does not put it on PYTHONPATH
TOOLS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools")
if TOOLS not in sys.path:
    sys.path.append(TOOLS)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODULES = os.path.join(REPO, "plugins", "modules")
COLLECTIONS = os.path.join(REPO, ".tmp", "collections")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def run_plugin_module(name, args, tmp_path, inside=None, timeout=60):
    """Run plugins/modules/<name>.py the way Ansible does (arguments in a JSON file); ``inside``: a host pid whose
    PID and mount namespaces to enter. Returns ``(result dict, seconds)``."""
    args_file = tmp_path / ("args-%s-%d.json" % (name, time.monotonic_ns()))
    args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    argv = [sys.executable, os.path.join(MODULES, name + ".py"), str(args_file)]
    if inside is not None:
        argv = ["nsenter", "-t", str(inside), "-p", "-m", "--"] + argv
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([COLLECTIONS] + [p for p in sys.path if p]))
    started = time.monotonic()
    try:
        done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                              env=env, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail("%s did not answer within %ss: %s" % (name, timeout, args))
    elapsed = time.monotonic() - started
    try:
        return json.loads(done.stdout), elapsed
    except ValueError:
        pytest.fail("%s gave no JSON (rc %s): %s %s" % (name, done.returncode, done.stdout[-2000:], done.stderr[-2000:]))


def chromium(page, *args):
    profile = tempfile.mkdtemp(prefix="gpufleet-chromium-")
    try:
        argv = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--user-data-dir=%s" % profile] + list(args) + ["file://" + page]
        return subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                              timeout=120, check=False)
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def png_pixels(path):
    """(width, height, rows of RGB(A) bytes) of an 8-bit RGB/RGBA PNG, decoded with zlib and the PNG filters."""
    with open(path, "rb") as handle:
        data = handle.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    offset, idat, header = 8, b"", None
    while offset < len(data):
        length, kind = struct.unpack(">I4s", data[offset:offset + 8])
        chunk = data[offset + 8:offset + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", chunk)
        elif kind == b"IDAT":
            idat += chunk
        offset += 12 + length
    width, height, depth, color = header[:4]
    assert depth == 8 and color in (2, 6), "an 8-bit RGB or RGBA PNG, got depth %d color type %d" % (depth, color)
    channels = 3 if color == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, previous = [], bytearray(stride)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up = previous[i]
            upper_left = previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - upper_left
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - upper_left)
                pred = left if pa <= pb and pa <= pc else (up if pb <= pc else upper_left)
                line[i] = (line[i] + pred) & 0xFF
        rows.append(bytes(line))
        previous = line
    return width, height, channels, rows


def non_white_share(path):
    width, height, channels, rows = png_pixels(path)
    coloured = 0
    for row in rows:
        for x in range(0, width * channels, channels):
            if min(row[x:x + 3]) < 200:
                coloured += 1
    return float(coloured) / (width * height)
