# zklock: build the C module for Lua 5.4 and LuaJIT, install Debian
# packages, run the specs, the demo and the benchmarks.
LUA54_INC  ?= /usr/include/lua5.4
LUAJIT_INC ?= /usr/include/luajit-2.1
LUA_INC_DIR ?= /usr/include
CC         ?= cc
CFLAGS     ?= -O2 -g
WARN        = -Wall -Wextra -Wmissing-prototypes -Wstrict-prototypes -Wshadow
# ZK=tls (the default): link the static ZooKeeper C client built with
# OpenSSL and Cyrus SASL from Debian's source (tools/zkclient.sh, into
# build/zkc); ZK=system: Debian's libzookeeper_mt, without TLS or SASL
# (docs/security.md, "Builds").  Switching: make clean first.
ZK         ?= tls
ZKC         = build/zkc
ifeq ($(ZK),system)
ZK_INC      =
ZK_LIBS     = -lzookeeper_mt
ZK_DEP      =
else
ZK_INC      = -I$(ZKC)/include -DHAVE_OPENSSL_H -DHAVE_CYRUS_SASL_H \
              -DZKL_WITH_OPENSSL -DZKL_STATIC_ZKC
ZK_LIBS     = $(ZKC)/lib/libzookeeper.a $(ZKC)/lib/libhashtable.a \
              -Wl,--exclude-libs,ALL -lssl -lcrypto -lsasl2 -lm -lrt
ZK_DEP      = $(ZKC)/stamp
endif
ZK_CFLAGS   = -DTHREADED -D_GNU_SOURCE -std=gnu99 -fPIC -fvisibility=hidden \
              $(ZK_INC)
LIBS        = $(ZK_LIBS) -lpthread

# zklock.core: the core (src/core, no Lua) and its binding (src/lua);
# zklock.testing.core: test equipment (src/testing), with the core's and
# the binding's pure helpers.  Layout: docs/design.md, "Source map".
SRC  = $(wildcard src/core/*.c src/core/*/*.c) $(wildcard src/lua/*.c)
HDRS = $(wildcard src/core/*.h src/core/*/*.h) $(wildcard src/lua/*.h)
TSRC = $(wildcard src/testing/*.c) src/core/base/util.c \
       src/core/base/errors.c src/core/base/zkcshim.c src/lua/lutil.c
THDRS = $(HDRS) $(wildcard src/testing/*.h)

# Debian packages: what `make deps` installs when missing.
DEPS = zookeeper libzookeeper-mt-dev libzookeeper-java dpkg-dev cmake \
       libssl-dev libsasl2-dev libsasl2-modules openssl lua5.4 liblua5.4-dev luajit2 \
       libluajit2-5.1-dev lua-busted \
       libcurator-recipes-java python3-kazoo default-jdk-headless \
       nginx-light libnginx-mod-http-lua curl wrk nghttp2-client nftables \
       python3-prometheus-client \
       lua-cqueues lua-luv lua-copas \
       luarocks
# and for the maintainers' targets: `make lint` luacheck; `make docs`
# LDoc, and an interpreter for it (its #! line runs Lua 5.2 or 5.1, but the
# package is content with lua5.4: name one); `make dev-deps` these and, for
# compat and test-compat, the other Lua versions' interpreters and headers
LINT_DEPS = lua-check
# `make profile`: perf (Debian's linux-perf)
PROFILE_DEPS = linux-perf
DOC_DEPS = lua-ldoc lua5.1
DEV_DEPS = $(LINT_DEPS) $(DOC_DEPS) lua5.3 liblua5.3-dev lua5.2 \
           liblua5.2-dev liblua5.1-0-dev

# Lua versions beyond the two of `make test` that the client, mutex and
# recipe specs run on (docs/compatibility.md, "Lua versions")
COMPAT = lua5.3 lua5.2 lua5.1
COMPAT_SPECS = spec/client_spec.lua spec/mutex_spec.lua \
  spec/semaphore_spec.lua spec/rwlock_spec.lua spec/barrier_spec.lua \
  spec/revoke_spec.lua

.PHONY: install all deps dev-deps test demo bench bench-memory bench-capacity profile memcheck asan torture chaos chaos-found soak clean \
        distclean env zk zk-stop \
        compat test-compat lint docs rockspec-check

all: build/lua5.4/zklock/core.so build/luajit/zklock/core.so \
     build/lua5.4/zklock/testing/core.so build/luajit/zklock/testing/core.so

build/lua5.4/zklock/core.so: $(SRC) $(HDRS) $(ZK_DEP)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(WARN) $(ZK_CFLAGS) -I$(LUA54_INC) -shared -o $@ $(SRC) $(LIBS)

build/luajit/zklock/core.so: $(SRC) $(HDRS) $(ZK_DEP)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(WARN) $(ZK_CFLAGS) -I$(LUAJIT_INC) -shared -o $@ $(SRC) $(LIBS)

build/lua5.4/zklock/testing/core.so: $(TSRC) $(THDRS) $(ZK_DEP)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(WARN) $(ZK_CFLAGS) -I$(LUA54_INC) -shared -o $@ $(TSRC) $(LIBS)

build/luajit/zklock/testing/core.so: $(TSRC) $(THDRS) $(ZK_DEP)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(WARN) $(ZK_CFLAGS) -I$(LUAJIT_INC) -shared -o $@ $(TSRC) $(LIBS)

# make install: the library, its C modules (this build: the TLS one by
# default) and the zklock command under $(PREFIX), in the layout Lua and
# LuaRocks search: $(PREFIX)/share/lua/V and $(PREFIX)/lib/lua/V for each
# runtime of INSTALL_RUNTIMES (lua5.4: V = 5.4; luajit: V = 5.1), and
# $(PREFIX)/bin/zklock, which finds them from where it is.  A LuaRocks
# tree is such a prefix (PREFIX=$$HOME/.luarocks), though the rock is not
# in its manifest (docs/security.md, "Builds").  DESTDIR for packaging.
PREFIX ?= /usr/local
DESTDIR ?=
INSTALL_RUNTIMES ?= lua5.4 luajit
INSTALL ?= install

install: all
	@set -e; root='$(DESTDIR)$(PREFIX)'; \
	for rt in $(INSTALL_RUNTIMES); do \
	  case $$rt in luajit) v=5.1 ;; lua5.*) v=$${rt#lua} ;; \
	    *) echo "make install: unknown runtime $$rt" >&2; exit 1 ;; esac; \
	  for f in $$(cd lua && find zklock -name '*.lua' | sort); do \
	    $(INSTALL) -d "$$root/share/lua/$$v/$$(dirname $$f)"; \
	    $(INSTALL) -m 644 "lua/$$f" "$$root/share/lua/$$v/$$f"; \
	  done; \
	  for m in zklock/core.so zklock/testing/core.so; do \
	    $(INSTALL) -d "$$root/lib/lua/$$v/$$(dirname $$m)"; \
	    $(INSTALL) -m 755 "build/$$rt/$$m" "$$root/lib/lua/$$v/$$m"; \
	  done; \
	  echo "installed zklock for $$rt: $$root/share/lua/$$v, $$root/lib/lua/$$v"; \
	done; \
	$(INSTALL) -d "$$root/bin"; \
	$(INSTALL) -m 755 bin/zklock "$$root/bin/zklock"; \
	echo "installed $$root/bin/zklock"

# Lua 5.1-5.3 (make compat): build/lua5.N/zklock/core.so and testing/core.so
compat: $(foreach v,$(COMPAT),build/$(v)/zklock/core.so \
          build/$(v)/zklock/testing/core.so)

build/lua5.%/zklock/core.so: $(SRC) $(HDRS) $(ZK_DEP)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(WARN) $(ZK_CFLAGS) -I$(LUA_INC_DIR)/lua5.$* -shared -o $@ $(SRC) $(LIBS)

build/lua5.%/zklock/testing/core.so: $(TSRC) $(THDRS) $(ZK_DEP)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(WARN) $(ZK_CFLAGS) -I$(LUA_INC_DIR)/lua5.$* -shared -o $@ $(TSRC) $(LIBS)

# AddressSanitizer builds of the module (run with LD_PRELOAD of libasan):
# build/asan for Lua 5.4 (outside scripts use LUA_CPATH='build/asan/?.so'),
# build/asan-luajit for nginx
ASAN_CFLAGS = -O1 -g -fsanitize=address -fno-omit-frame-pointer
build/asan/zklock/core.so: $(SRC) $(HDRS) $(ZK_DEP)
	@mkdir -p $(@D)
	$(CC) $(ASAN_CFLAGS) $(WARN) $(ZK_CFLAGS) \
	  -I$(LUA54_INC) -shared -o $@ $(SRC) $(LIBS)

build/asan-luajit/zklock/core.so: $(SRC) $(HDRS) $(ZK_DEP)
	@mkdir -p $(@D)
	$(CC) $(ASAN_CFLAGS) $(WARN) $(ZK_CFLAGS) \
	  -I$(LUAJIT_INC) -shared -o $@ $(SRC) $(LIBS)

build/asan/zklock/testing/core.so: $(TSRC) $(THDRS) $(ZK_DEP)
	@mkdir -p $(@D)
	$(CC) $(ASAN_CFLAGS) $(WARN) $(ZK_CFLAGS) \
	  -I$(LUA54_INC) -shared -o $@ $(TSRC) $(LIBS)

build/asan-luajit/zklock/testing/core.so: $(TSRC) $(THDRS) $(ZK_DEP)
	@mkdir -p $(@D)
	$(CC) $(ASAN_CFLAGS) $(WARN) $(ZK_CFLAGS) \
	  -I$(LUAJIT_INC) -shared -o $@ $(TSRC) $(LIBS)

# The tree's Lua modules and a runtime's build, as LUA_PATH and LUA_CPATH
# (absolute, so they serve from any directory).  Quoted for the shell.
QROOT   = $(subst ','\'',$(CURDIR))
TREE_LPATH = $(QROOT)/lua/?.lua;$(QROOT)/lua/?/init.lua
# (not ?=: an exported LUA, a path in some CI set-ups, must not name the
# build; `make -s env LUA=luajit` still does)
LUA = lua5.4

# eval "$$(make -s env)": LUA_PATH and LUA_CPATH for running scripts
# against this tree (README, "Quick start"); make -s env LUA=luajit for
# LuaJIT.  The runtime's build is made first, its output on stderr, so
# that stdout holds the two export lines alone.
env:
	@$(MAKE) --no-print-directory build/$(LUA)/zklock/core.so \
	  build/$(LUA)/zklock/testing/core.so >&2
	@echo "export LUA_PATH='$(TREE_LPATH);;'"
	@echo "export LUA_CPATH='$(QROOT)/build/$(LUA)/?.so;;'"

# make zk: a throwaway standalone ZooKeeper on 127.0.0.1:$(ZK_PORT) in the
# background, data and log in $(ZK_DIR), until make zk-stop
# (tools/zk.lua).  Says so when it already runs.
ZK_PORT ?= 2181
ZK_DIR  ?= build/zk
ZK_TOOL  = LUA_PATH='$(TREE_LPATH)' LUA_CPATH='$(QROOT)/build/lua5.4/?.so' \
           lua5.4 tools/zk.lua
zk: deps build/lua5.4/zklock/core.so build/lua5.4/zklock/testing/core.so
	@$(ZK_TOOL) start '$(abspath $(ZK_DIR))' $(ZK_PORT)

zk-stop:
	@$(ZK_TOOL) stop '$(abspath $(ZK_DIR))'

deps:
	@sh tools/deps.sh $(DEPS)
	@$(if $(ZK_DEP),sh tools/zkclient.sh $(ZKC))

# the TLS/SASL C client (ZK=tls): built once per zookeeper package version
$(ZKC)/stamp: tools/zkclient.sh tools/zkclient-tls-handshake.patch \
             tools/zkclient-io-completions.patch tools/zkclient-follow.patch \
             tools/zkclient-tls-peer.patch
	@sh tools/deps.sh $(DEPS)
	@sh tools/zkclient.sh $(ZKC)
	@touch $@

dev-deps:
	@sh tools/deps.sh $(DEV_DEPS)

# SPECS: spec files (and busted options) instead of the whole suite, e.g.
# make test SPECS=spec/names_spec.lua
test: deps all
	@sh spec/run.sh $(SPECS)

# the client, mutex and recipe specs under Lua 5.3, 5.2 and PUC Lua 5.1
test-compat: deps dev-deps compat
	@ZKLOCK_RUNTIMES="$(COMPAT)" sh spec/run.sh $(COMPAT_SPECS)

# luacheck (.luacheckrc) over lua/, spec/, examples/, bench/, tools/
lint:
	@sh tools/deps.sh $(LINT_DEPS)
	luacheck -q lua spec examples bench tools bin/zklock

# API reference from the doc comments (config.ld) into build/docs (half a
# second; CI runs it).  Any LDoc warning fails the target, and so does a
# page that shows a doc tag as text or an internal name (the table of
# client methods, the box of a recipe object).  (LDoc's `merge`, config.ld,
# prints which file holds the master module: that is no warning.)
docs:
	@sh tools/deps.sh $(DOC_DEPS)
	@rm -rf build/docs && mkdir -p build/docs
	@ldoc --fatalwarnings -q . >build/docs.log 2>&1; rc=$$?; \
	  grep -v -e '^reading configuration from config.ld$$' \
	    -e '^found master module' -e '^\*\*\*closing section from master' \
	    build/docs.log >build/docs.warn; cat build/docs.warn; \
	  if [ $$rc -ne 0 ] || [ -s build/docs.warn ]; then \
	    echo "make docs: LDoc warned (above)" >&2; exit 1; fi
	@if grep -n -E '@(t?param|t?return|string|int)\b|client_methods|core\.box' \
	    $$(find build/docs -name '*.html'); then \
	  echo "make docs: a tag shown as text, or an internal name (above)" >&2; \
	  exit 1; fi
	@echo "API reference: build/docs/index.html"

# both rockspecs: luarocks lint, and the versioned one's modules and
# sources equal to scm-1's, its version equal to zklock._VERSION
rockspec-check: all
	@sh tools/rockspec-check.sh

demo: deps all
	@sh examples/demo.sh

bench: deps all build/floor_list
	@sh bench/run.sh

# where an uncontended cycle's time goes (bench/profile.lua, a few minutes;
# docs/performance.md, "Where a cycle's time goes"): per thread and shared
# object (perf), system calls, Lua instructions, bytes and files per
# cycle.  PROFILE_TREE=DIR profiles another checkout's lua/ and build/
# (build it first: make -C DIR all) with this tree's tools and floor.
profile: deps all build/floor
	@sh tools/deps.sh $(PROFILE_DEPS)
	@LUA_PATH='$(TREE_LPATH);;' LUA_CPATH='$(QROOT)/build/lua5.4/?.so;;' \
	  lua5.4 bench/profile.lua

# what one ensemble carries (bench/capacity.lua, docs/capacity.md): 10,
# 100 and 1,000 sessions on a 3-member ensemble, cohorts off and on;
# about 5 minutes, outside make bench (CAPACITY_MEMBERS="3 5" adds a
# 5-member ensemble; CAPACITY_SIZES, CAPACITY_SECONDS)
bench-capacity: deps all
	@run=$$(mktemp -d /tmp/zklock-capacity.XXXXXX); \
	  ZKLOCK_TEST_TMP=$$run LUA_PATH='./lua/?.lua;./lua/?/init.lua;;' \
	  LUA_CPATH='./build/lua5.4/?.so;;' lua5.4 bench/capacity.lua; \
	  rc=$$?; pkill -f "$$run" 2>/dev/null; rm -rf "$$run"; exit $$rc

# W5 to 10^6 cycles per runtime (about 30 minutes; make bench stops at 10^5)
bench-memory: deps all
	@BENCH_ONLY=w5 BENCH_W5_CYCLES="100000 1000000" sh bench/run.sh

# minutes: workers on a 3-member ensemble through fault-injecting proxies,
# then a checker; and the checker proven against a broken lock
torture: deps all
	@sh spec/torture.sh full

# the chaos run (docs/testing.md, "The chaos run"): random programs over
# every recipe and option, faults, a checker per recipe.  make chaos
# replays a seed (SEED=n) of a profile (PROFILE: chaos, short, quick,
# broken; every option and composition is in: ONLY=COMPOSITION keeps
# one of issue 22's, ONLY=none none, FOCUS=COMPOSITION keeps one and
# draws it more often; TRANSPORT=plain|tls|sasl secures a standalone
# run's sessions, else the seed draws it);
# make soak runs 30 minutes on a 3-member ensemble; make soak
# PROFILE=moving, 30 minutes of that profile (5 members and an observer,
# membership changes: issue 35)
SOAK_PROFILE := $(if $(filter command line environment,$(origin PROFILE)),$(PROFILE))
PROFILE ?= chaos
chaos: deps all
	@sh spec/in_rundir.sh chaos lua5.4 spec/chaos/run.lua $(PROFILE) $(SEED) \
	  $(if $(ONLY),only=$(ONLY)) $(if $(FOCUS),focus=$(FOCUS)) \
	  $(if $(TRANSPORT),transport=$(TRANSPORT))

# make chaos-found: the seeds that found issue 22's compositions, issue
# 32's defects 1 and 3 and issue 33's multilock defect, each replayed in
# the quick profile, focused on its own (~3 min)
chaos-found: deps all
	@sh spec/in_rundir.sh chaos lua5.4 spec/chaos/run.lua found

soak: deps all
	@sh spec/in_rundir.sh soak lua5.4 spec/chaos/run.lua \
	  $(if $(SOAK_PROFILE),$(SOAK_PROFILE) seconds=1800,soak) $(SEED) \
	  $(if $(ONLY),only=$(ONLY))

# make memcheck: the Lua 5.4 suite under valgrind, every spec file but
#  - spec/nginx_spec.lua: nginx runs LuaJIT; under Lua 5.4 the file is empty
#    (make asan covers it, nginx included);
#  - spec/torture_spec.lua and spec/chaos_spec.lua: their work happens in
#    worker processes, which valgrind does not follow (the same C paths run
#    in every other spec; make asan runs them, workers included);
#  - the #busythread-tagged spec: valgrind runs one thread at a time, and
#    its churning thread stalls every spawn for seconds (make asan runs it);
#  - the #fork-tagged spec: valgrind hangs in a forked child of a threaded
#    process (make asan runs it).
MEMCHECK_EXCLUDE = spec/nginx_spec.lua spec/torture_spec.lua \
  spec/chaos_spec.lua
memcheck: deps all
	@sh spec/memcheck.sh $(filter-out $(MEMCHECK_EXCLUDE),$(wildcard spec/*_spec.lua))

# make asan: every spec file, nginx included (spec/asan.sh)
asan: deps build/asan/zklock/core.so build/asan-luajit/zklock/core.so \
      build/asan/zklock/testing/core.so build/asan-luajit/zklock/testing/core.so
	@sh spec/asan.sh

# clean keeps the built C client (build/zkc: a download); distclean not
clean:
	[ ! -d build ] || find build -mindepth 1 -maxdepth 1 ! -name zkc \
	  -exec rm -rf {} +

distclean:
	rm -rf build

build/floor: bench/floor.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(WARN) -DTHREADED -o $@ bench/floor.c -lzookeeper_mt -lpthread

# the lock protocol's floor (floor.create_list_delete): bench/floor.c with
# the C client zklock builds (its IO-thread completions)
build/floor_list: bench/floor.c src/core/base/zkcshim.c $(ZK_DEP)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(WARN) -DTHREADED -D_GNU_SOURCE $(ZK_INC) -o $@ \
	  bench/floor.c src/core/base/zkcshim.c $(LIBS)

