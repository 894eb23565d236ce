# trtpipe: `make demo` runs the whole pipeline on the shipped models; `make test` runs the tests.
# Both create or refresh .venv and install what they need.

PYTHON ?= $(shell command -v python3.11 || command -v python3.12 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
comma := ,
TRTPIPE := $(VENV)/bin/trtpipe
MODELS ?= $(or $(MODEL),digits efficientnet-lite0 minilm)  # MODEL=digits picks one
PRECISIONS ?= fp16 int8 fp8
BUILD := build

# With a GPU and full TensorRT, engines are built for this GPU and measured; otherwise
# TensorRT-RTX builds real engines for TARGET on the CPU and validation simulates the typed ONNX.
HAVE_TRT := $(shell nvidia-smi -L >/dev/null 2>&1 && $(PY) -c 'import tensorrt, pycuda' >/dev/null 2>&1 && echo yes)
ifeq ($(HAVE_TRT),yes)
TARGET ?= auto
BACKEND ?= tensorrt
SM ?= $(shell $(TRTPIPE) plan --target auto --json | $(PY) -c 'import json,sys; print(json.load(sys.stdin)["target"])')
CANDIDATE = engine
else
TARGET ?= sm_89
BACKEND ?= tensorrt-rtx
SM ?= $(subst _,,$(TARGET))
CANDIDATE = onnx
endif

.PHONY: all demo demo-lowbit test lint engines validate clean bench-copies bench-calibrate wheelhouse venv serve bench-serve check-reproducible tune bench-quality
all: demo

# Every install takes the exact versions in constraints.txt, so that no release can change what a
# fresh clone installs (ml_dtypes 0.7, numpy 2 only, once broke the Triton stub). PIP_CONSTRAINT, not
# -c, so that pip's isolated build of trtpipe itself takes the locked setuptools too. `make lock`
# resolves everything anew and rewrites the file; commit it when `make test` passes on it.
LOCK := constraints.txt
PIP := PIP_CONSTRAINT=$(CURDIR)/$(LOCK) $(PY) -m pip
$(VENV)/.created: $(LOCK)
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	touch $@

# Serving (pyproject's serve extra) without giving up numpy 2: see the comment there.
SERVE_PINS := nvidia-pytriton==0.7.0 tritonclient==2.73.0
TEST_EXTRAS := pipeline,rtx,test,serve-deps
DEMO_EXTRAS := pipeline,rtx,export,test
$(VENV)/.test: pyproject.toml $(LOCK) $(VENV)/.created
	$(PIP) install -q -e '.[$(TEST_EXTRAS)]'
	$(PIP) install -q --no-deps $(SERVE_PINS)
	$(PY) -m trtpipe.serve.environment
	touch $@

$(VENV)/.demo: pyproject.toml $(LOCK) $(VENV)/.test
	$(PIP) install -q -e '.[$(DEMO_EXTRAS)]'
	touch $@

# A fresh resolution of what `make test` and `make demo` install, written to constraints.txt.
LOCK_VENV := $(BUILD)/lock-venv
.PHONY: lock
lock:
	rm -rf $(LOCK_VENV)
	$(PYTHON) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/python -m pip install -q --upgrade pip
	$(LOCK_VENV)/bin/python -m pip install -q -e '.[$(TEST_EXTRAS),$(DEMO_EXTRAS)]'
	$(LOCK_VENV)/bin/python -m pip install -q --no-deps $(SERVE_PINS)
	{ echo '# Exact versions for .venv (make test, make demo): written by `make lock` on $(shell date -u +%Y-%m-%d), Python $(shell $(PYTHON) -c "import platform; print(platform.python_version())").'; \
	  $(LOCK_VENV)/bin/python -m pip freeze --all --exclude-editable; } > $(LOCK).tmp
	mv $(LOCK).tmp $(LOCK)
	rm -rf $(LOCK_VENV)

venv: $(VENV)/.demo

test: lint
	$(PY) -m pytest -q

lint: $(VENV)/.test
	$(VENV)/bin/ruff check trtpipe models tests scripts
	$(VENV)/bin/mypy  # what it checks: [tool.mypy] in pyproject.toml (trtpipe/graph, trtpipe/runtime)

# ---- the pipeline, per model and precision -------------------------------------------------
# Installing packages does not re-export (.venv is order-only); editing export.py does.
# build/M/M.onnx -> build/M/M.P.cache -> build/M/M.P.onnx + M.P.SM.engine -> build/M/reports/M.P.json
# INT8 of a model whose spec sets [quantize] smooth calibrates and builds from build/M/smoothed/M.onnx.

smooths = $(shell grep -qs '^smooth *=' models/$(1)/model.toml && echo yes)
source = $(BUILD)/$(1)/$(if $(and $(filter int8,$(2)),$(call smooths,$(1))),smoothed/)$(1).onnx
# TUNED=yes: INT8/FP8 engines use the cache and exclusions that `trtpipe tune` chose (make tune).
cache = $(if $(filter int8 fp8,$(2)),$(BUILD)/$(1)/$(1).$(2).$(if $(TUNED),tuned.)cache)
tuned_exclude = $(if $(and $(TUNED),$(filter int8 fp8,$(2))),--exclude @$(BUILD)/$(1)/$(1).$(2).tuned.toml)

define MODEL_RULES
$(BUILD)/$(1)/$(1).onnx: models/$(1)/export.py | $(VENV)/.demo
	$(PY) models/$(1)/export.py -o $$@

$(BUILD)/$(1)/smoothed/$(1).onnx: $(BUILD)/$(1)/$(1).onnx models/$(1)/model.toml
	$(TRTPIPE) smooth $$< --spec models/$(1)/model.toml -o $$@
endef

define ENGINE_RULES
$(BUILD)/$(1)/$(1).$(2).cache: $(call source,$(1),$(2)) models/$(1)/model.toml
	$(TRTPIPE) calibrate $$< --precision $(2) --spec models/$(1)/model.toml -o $$@

$(BUILD)/$(1)/$(1).$(2).$(SM).engine: $(call source,$(1),$(2)) $(call cache,$(1),$(2)) models/$(1)/model.toml
	$(TRTPIPE) build $$< --precision $(2) --target $(TARGET) --backend $(BACKEND) --spec models/$(1)/model.toml \
		$(if $(call cache,$(1),$(2)),--cache $(call cache,$(1),$(2))) $(call tuned_exclude,$(1),$(2)) -o $(BUILD)/$(1)

# `inspect` checks the engine against the sha256 its sidecar records before anything is measured.
$(BUILD)/$(1)/reports/$(1).$(2).json: $(BUILD)/$(1)/$(1).$(2).$(SM).engine
	$(TRTPIPE) inspect $$< > /dev/null
	@mkdir -p $(BUILD)/$(1)/reports
	$(TRTPIPE) validate $(BUILD)/$(1)/$(1).$(2).$(if $(filter engine,$(CANDIDATE)),$(SM).engine,onnx) \
		--baseline $(BUILD)/$(1)/$(1).onnx --spec models/$(1)/model.toml --report $(BUILD)/$(1)/reports --json \
		> $$@.tmp || [ $$$$? -eq 1 ]
	mv $$@.tmp $$@
endef

$(foreach m,$(MODELS),$(eval $(call MODEL_RULES,$(m))))
$(foreach m,$(MODELS),$(foreach p,$(PRECISIONS),$(eval $(call ENGINE_RULES,$(m),$(p)))))

# The fastest configuration that meets the spec (estimated on TARGET's GPU), searched on the
# calibration data and confirmed on the validation set; a smoothed INT8 model is compared with its original.
# Exit 1 (nothing met the spec: the closest is written, and its report says so) does not stop make.
TUNE_BUDGET ?= 10
define TUNE_RULES
$(BUILD)/$(1)/$(1).$(2).tuned.cache: $(call source,$(1),$(2)) models/$(1)/model.toml
	$(TRTPIPE) tune $$< --spec models/$(1)/model.toml --precision $(2) --target $(TARGET) --budget-min $(TUNE_BUDGET) \
		$(if $(findstring smoothed,$(call source,$(1),$(2))),--baseline $(BUILD)/$(1)/$(1).onnx) -o $$@ \
		|| [ $$$$? -eq 1 ]
endef
$(foreach m,$(MODELS),$(foreach p,int8 fp8,$(eval $(call TUNE_RULES,$(m),$(p)))))
TUNED_CACHES := $(foreach m,$(MODELS),$(foreach p,int8 fp8,$(BUILD)/$(m)/$(m).$(p).tuned.cache))
DEFAULT_CACHES := $(foreach m,$(MODELS),$(foreach p,int8 fp8,$(BUILD)/$(m)/$(m).$(p).cache))

ENGINES := $(foreach m,$(MODELS),$(foreach p,$(PRECISIONS),$(BUILD)/$(m)/$(m).$(p).$(SM).engine))
REPORTS := $(foreach m,$(MODELS),$(foreach p,$(PRECISIONS),$(BUILD)/$(m)/reports/$(m).$(p).json))

engines: $(ENGINES)

# The table of every model and precision; fails (exit 1) when any report failed.
validate: $(REPORTS)
	$(TRTPIPE) summary $(REPORTS)

demo: $(REPORTS)
	@$(TRTPIPE) summary --no-fail $(REPORTS)

# ---- low bits: MiniLM in INT4 weight-only (AWQ+GPTQ; AWQ alone and round-to-nearest to beat) and NVFP4
# Engines for INT4_TARGET (SM 8.0+) and FP4_TARGET (SM 12.x with TensorRT-RTX) built on this machine;
# validation simulates the typed ONNX on the CPU unless a GPU of that target runs the engine.
# INT4's block size comes from the model's spec ([quantize] block_size; MiniLM's is 32).
LOWBIT_MODEL ?= minilm
INT4_TARGET ?= sm_89
FP4_TARGET ?= sm_120
L := $(LOWBIT_MODEL)
LB := $(BUILD)/$(L)/lowbit
LOWBIT_SPEC := --spec models/$(L)/model.toml
lowbit_validate = $(TRTPIPE) validate $(1) --baseline $(BUILD)/$(L)/$(L).onnx $(LOWBIT_SPEC) --report $(dir $(2)) --json \
	> $(2).tmp || [ $$? -eq 1 ]; mv $(2).tmp $(2)

$(LB)/awq/$(L).onnx: $(BUILD)/$(L)/$(L).onnx models/$(L)/model.toml
	$(TRTPIPE) awq $< $(LOWBIT_SPEC) -o $@

$(LB)/$(L).int4.$(subst _,,$(INT4_TARGET)).engine: $(LB)/awq/$(L).onnx
	$(TRTPIPE) build $< --precision int4 --target $(INT4_TARGET) --backend tensorrt-rtx $(LOWBIT_SPEC) -o $(LB)

# The same model under its own names, so that the table tells them apart; same blocks.
$(LB)/rtn/$(L)-rtn.onnx: $(BUILD)/$(L)/$(L).onnx models/$(L)/model.toml
	$(TRTPIPE) awq $< $(LOWBIT_SPEC) --round-to-nearest -o $@

$(LB)/awq-only/$(L)-awq-only.onnx: $(BUILD)/$(L)/$(L).onnx models/$(L)/model.toml
	$(TRTPIPE) awq $< $(LOWBIT_SPEC) --no-gptq -o $@

$(LB)/awq-only/$(L)-awq-only.int4.$(subst _,,$(INT4_TARGET)).engine: $(LB)/awq-only/$(L)-awq-only.onnx
	$(TRTPIPE) build $< --precision int4 --target $(INT4_TARGET) --backend tensorrt-rtx $(LOWBIT_SPEC) -o $(LB)/awq-only

$(LB)/rtn/$(L)-rtn.int4.$(subst _,,$(INT4_TARGET)).engine: $(LB)/rtn/$(L)-rtn.onnx
	$(TRTPIPE) build $< --precision int4 --target $(INT4_TARGET) --backend tensorrt-rtx $(LOWBIT_SPEC) -o $(LB)/rtn

$(LB)/$(L).fp4.$(subst _,,$(FP4_TARGET)).engine: $(BUILD)/$(L)/$(L).onnx $(BUILD)/$(L)/$(L).fp8.cache
	$(TRTPIPE) build $< --precision fp4 --target $(FP4_TARGET) --backend tensorrt-rtx $(LOWBIT_SPEC) \
		--cache $(BUILD)/$(L)/$(L).fp8.cache -o $(LB)

$(LB)/reports/$(L).int4.json: $(LB)/$(L).int4.$(subst _,,$(INT4_TARGET)).engine
	@mkdir -p $(dir $@)
	$(call lowbit_validate,$(LB)/$(L).int4.onnx,$@)

$(LB)/rtn/reports/$(L)-rtn.int4.json: $(LB)/rtn/$(L)-rtn.int4.$(subst _,,$(INT4_TARGET)).engine
	@mkdir -p $(dir $@)
	$(call lowbit_validate,$(LB)/rtn/$(L)-rtn.int4.onnx,$@)

$(LB)/awq-only/reports/$(L)-awq-only.int4.json: $(LB)/awq-only/$(L)-awq-only.int4.$(subst _,,$(INT4_TARGET)).engine
	@mkdir -p $(dir $@)
	$(call lowbit_validate,$(LB)/awq-only/$(L)-awq-only.int4.onnx,$@)

$(LB)/reports/$(L).fp4.json: $(LB)/$(L).fp4.$(subst _,,$(FP4_TARGET)).engine
	@mkdir -p $(dir $@)
	$(call lowbit_validate,$(LB)/$(L).fp4.onnx,$@)

LOWBIT_REPORTS := $(LB)/reports/$(L).int4.json $(LB)/awq-only/reports/$(L)-awq-only.int4.json \
	$(LB)/rtn/reports/$(L)-rtn.int4.json $(LB)/reports/$(L).fp4.json

# INT4 with AWQ+GPTQ, AWQ alone, round-to-nearest, NVFP4: one table (engine sizes beside the FP16 engine's).
demo-lowbit: $(LOWBIT_REPORTS) $(BUILD)/$(L)/$(L).fp16.$(SM).engine
	@$(TRTPIPE) summary --no-fail $(LOWBIT_REPORTS) $(BUILD)/$(L)/reports/$(L).fp16.json

# trtpipe's entropy calibration against ONNX Runtime's on 1,000 and 10,000 real digits, in one run.
bench-calibrate: $(BUILD)/digits/digits.onnx
	$(PY) scripts/bench_calibrate.py

# Serve one shipped model on Triton until Ctrl-C (HTTP 8000, gRPC 8001, metrics 8002):
#   make serve MODEL=digits [PRECISION=int8] [SERVE_FLAGS='--instances 2']
# FP32 ONNX by default; with PRECISION, its engine on a GPU host, else its typed ONNX (simulated).
SERVE_MODEL := $(or $(MODEL),digits)
SERVE_FILE := $(BUILD)/$(SERVE_MODEL)/$(SERVE_MODEL).$(if $(PRECISION),$(PRECISION).$(if $(filter engine,$(CANDIDATE)),$(SM).engine,onnx),onnx)
serve: $(if $(PRECISION),$(BUILD)/$(SERVE_MODEL)/$(SERVE_MODEL).$(PRECISION).$(SM).engine,$(BUILD)/$(SERVE_MODEL)/$(SERVE_MODEL).onnx)
	$(TRTPIPE) serve $(SERVE_FILE) $(SERVE_FLAGS)

# One run, about 2 min: a tiny MLP and MODEL (default EfficientNet-lite0, compute-bound) served by
# `trtpipe serve`, against the same runner in-process and against a floor server that computes
# nothing: p50/p99 at concurrency 1, throughput at 1, 4, 16 as ratios, the load average with each.
bench-serve: $(BUILD)/$(or $(MODEL),efficientnet-lite0)/$(or $(MODEL),efficientnet-lite0).onnx
	$(PY) scripts/bench_serve.py --model $(or $(MODEL),efficientnet-lite0) $(if $(SERVE_FLAGS),--serve-args '$(SERVE_FLAGS)')

# Public ONNX models from pinned PyPI wheels through the pipeline (FP16, INT8, FP8 for sm_89 with
# TensorRT-RTX, typed ONNX validated in ONNX Runtime); one table to docs/zoo.md. Not part of `make test`.
# ZOO=yolov8n,ppocr-det runs some (the other rows keep their last result). 15 min measured on 2 shared cores.
.PHONY: zoo
zoo: $(VENV)/.demo
	$(PY) scripts/zoo.py $(if $(ZOO),--only $(ZOO))
	TRTPIPE_DOCS_ZOO=1 $(PY) -m pytest -q tests/test_docs.py -k "guide or graph-passes"  # these pages download their model
# An independent judge of every typed ONNX in ZOO_BUILD (default build/zoo, read only), each scored by
# its package's own post-processing, beside validate's verdict: build/zoo-judge/judge.{json,md}. Its
# post-processing packages (pinned in constraints-judge.txt) go to build/zoo-judge/packages, never into the venv. Not part of `make test`.
ZOO_BUILD ?= build/zoo
JUDGE_PACKAGES := build/zoo-judge/packages
.PHONY: zoo-judge
zoo-judge: $(VENV)/.demo $(JUDGE_PACKAGES)/.installed
	PYTHONPATH=$(CURDIR):$(CURDIR)/$(JUDGE_PACKAGES) nice $(PY) scripts/zoo_judge.py --build $(ZOO_BUILD) $(subst $(comma), ,$(ZOO))
$(JUDGE_PACKAGES)/.installed: constraints-judge.txt
	PIP_CONSTRAINT=constraints-judge.txt $(PY) -m pip install --quiet --no-deps --target $(JUDGE_PACKAGES) opencv-python-headless pyclipper shapely \
		funasr-onnx kaldi-native-fbank
	touch $@
# `trtpipe deploy` on every zoo model's spec (ZOO=... for some), BUDGET minutes each (default 5): exit
# code, chosen engine and time per model, a second table in docs/zoo.md. Not part of `make test`.
.PHONY: zoo-deploy
zoo-deploy: $(VENV)/.demo
	$(PY) scripts/zoo.py --deploy $(if $(ZOO),--only $(ZOO)) $(if $(BUDGET),--budget-min $(BUDGET))
# Two exports of MODEL (default digits) from scratch, each in a fresh folder: every byte must agree.
check-reproducible: | $(VENV)/.demo
	$(PY) scripts/check_reproducible.py $(or $(MODEL),digits)
tune: $(TUNED_CACHES)

# trtpipe default and tuned against Model Optimizer's ONNX PTQ and ONNX Runtime's quantize_static, same
# data, trtpipe's validator; the peers live in their own environment so they never touch .venv.
# Their exact versions are in constraints-peers.txt (`make lock-peers` resolves them anew).
PEERS_VENV := $(BUILD)/peers-venv
PEERS := 'nvidia-modelopt[onnx]==0.47.0' 'onnxruntime==1.24.1'
PEERS_LOCK := constraints-peers.txt
$(PEERS_VENV)/.created: $(PEERS_LOCK)
	$(PYTHON) -m venv $(PEERS_VENV)
	PIP_CONSTRAINT=$(CURDIR)/$(PEERS_LOCK) $(PEERS_VENV)/bin/python -m pip install -q --upgrade pip
	PIP_CONSTRAINT=$(CURDIR)/$(PEERS_LOCK) $(PEERS_VENV)/bin/python -m pip install -q $(PEERS)
	touch $@

.PHONY: lock-peers
lock-peers:
	rm -rf $(LOCK_VENV)-peers
	$(PYTHON) -m venv $(LOCK_VENV)-peers
	$(LOCK_VENV)-peers/bin/python -m pip install -q --upgrade pip
	$(LOCK_VENV)-peers/bin/python -m pip install -q $(PEERS)
	{ echo '# Exact versions for the peers of make bench-quality: written by `make lock-peers` on $(shell date -u +%Y-%m-%d).'; \
	  $(LOCK_VENV)-peers/bin/python -m pip freeze --all; } > $(PEERS_LOCK).tmp
	mv $(PEERS_LOCK).tmp $(PEERS_LOCK)
	rm -rf $(LOCK_VENV)-peers

# Then the zoo's peer table (docs/zoo.md): trtpipe's default beside both peers on every zoo model, or on
# ZOO=a,b only (hours on 2 cores for all of them: each model is calibrated and judged three times).
bench-quality: $(PEERS_VENV)/.created $(DEFAULT_CACHES) $(TUNED_CACHES)
	$(PY) scripts/bench_quality.py --models $(MODELS) --target $(TARGET) --peers-python $(PEERS_VENV)/bin/python
	$(PY) scripts/bench_methods.py $(if $(ZOO),--only $(ZOO)) --methods auto,modelopt,onnxruntime --table peers --docs \
	    --peers-python $(PEERS_VENV)/bin/python --results $(BUILD)/bench-methods/peers.json

# GPU host only: the runtime's copies against torch's, in one run.
bench-copies: $(VENV)/.test
	$(PY) scripts/bench_copies.py

# GPU host only (pycuda, torch): trtpipe bench against a known 2 ms kernel and torch's copy, and the
# runtime's per-call overhead against torch's, with the stand-in execution context (docs/runtime.md).
.PHONY: bench-runtime
bench-runtime: $(VENV)/.test
	$(PY) scripts/h200_bench_proof.py

# Wheels and sdists to install trtpipe[gpu] on an air-gapped GPU host: PYVER=3.12 PLATFORM=manylinux_2_28_x86_64
PYVER ?= 3.12
PLATFORM ?= manylinux_2_28_x86_64
wheelhouse: $(VENV)/.test
	$(PY) scripts/wheelhouse.py --python-version $(PYVER) --platform $(PLATFORM) -o wheelhouse

clean:
	rm -rf $(BUILD)
