# trtpipe: `make demo` runs the whole pipeline on the shipped models; `make test` runs the tests.
# Both create or refresh .venv and install what they need.

PYTHON ?= $(shell command -v python3.11 || command -v python3.12 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
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

.PHONY: all demo test lint engines validate clean bench-copies bench-calibrate wheelhouse venv tune bench-quality
all: demo

$(VENV)/.created:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	touch $@

$(VENV)/.test: pyproject.toml $(VENV)/.created
	$(PY) -m pip install -q -e '.[rtx,test]'
	touch $@

$(VENV)/.demo: pyproject.toml $(VENV)/.test
	$(PY) -m pip install -q -e '.[rtx,export,test]'
	touch $@

venv: $(VENV)/.demo

test: lint
	$(PY) -m pytest -q

lint: $(VENV)/.test
	$(VENV)/bin/ruff check trtpipe calibrators models tests scripts

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

$(BUILD)/$(1)/reports/$(1).$(2).json: $(BUILD)/$(1)/$(1).$(2).$(SM).engine
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
TUNE_BUDGET ?= 10
define TUNE_RULES
$(BUILD)/$(1)/$(1).$(2).tuned.cache: $(call source,$(1),$(2)) models/$(1)/model.toml
	$(TRTPIPE) tune $$< --spec models/$(1)/model.toml --precision $(2) --target $(TARGET) --budget-min $(TUNE_BUDGET) \
		$(if $(findstring smoothed,$(call source,$(1),$(2))),--baseline $(BUILD)/$(1)/$(1).onnx) -o $$@
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

# trtpipe's entropy calibration against ONNX Runtime's on 1,000 and 10,000 real digits, in one run.
bench-calibrate: $(BUILD)/digits/digits.onnx
	$(PY) scripts/bench_calibrate.py

tune: $(TUNED_CACHES)

# trtpipe default and tuned against Model Optimizer's ONNX PTQ and ONNX Runtime's quantize_static, same
# data, trtpipe's validator; the peers live in their own environment so they never touch .venv.
PEERS_VENV := $(BUILD)/peers-venv
$(PEERS_VENV)/.created:
	$(PYTHON) -m venv $(PEERS_VENV)
	$(PEERS_VENV)/bin/pip install -q 'nvidia-modelopt[onnx]==0.47.0' 'onnxruntime==1.24.1'
	touch $@

bench-quality: $(PEERS_VENV)/.created $(DEFAULT_CACHES) $(TUNED_CACHES)
	$(PY) scripts/bench_quality.py --models $(MODELS) --target $(TARGET) --peers-python $(PEERS_VENV)/bin/python

# GPU host only: the runtime's copies against torch's, in one run.
bench-copies: $(VENV)/.test
	$(PY) scripts/bench_copies.py

# Wheels and sdists to install trtpipe[gpu] on an air-gapped GPU host: PYVER=3.12 PLATFORM=manylinux_2_28_x86_64
PYVER ?= 3.12
PLATFORM ?= manylinux_2_28_x86_64
wheelhouse: $(VENV)/.test
	$(PY) scripts/wheelhouse.py --python-version $(PYVER) --platform $(PLATFORM) -o wheelhouse

clean:
	rm -rf $(BUILD)
