// The records of a TensorBoard event file (TensorFlow's core/util/event.proto, framed as TFRecord
// records): each function returns one serialized Event. Pure functions; the sink that writes them
// is metrics/tensorboard_sink.h.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "metrics/run_log.h"

namespace dtrain::tensorboard {

// What the first record of every event file says: the format TensorBoard reads.
inline constexpr std::string_view kFileVersion = "brain.Event:2";

// events.out.tfevents.<seconds, 10 digits>.<host>.<pid>.<n>: TensorFlow's name, so TensorBoard
// (which reads files whose names hold "tfevents") orders a folder's files by time.
std::string event_file_name(int64_t seconds, std::string_view host, int64_t pid, int64_t n);

std::string file_version_event(double wall_time);
// simple_value scalars, with the "scalars" plugin named.
std::string scalars_event(double wall_time, int64_t step,
                          const std::vector<std::pair<std::string, double>>& scalars);
// HistogramProto values in TensorFlow's default bucket layout (metrics/histogram.h).
std::string histograms_event(double wall_time, int64_t step,
                             const std::vector<NamedValues>& tensors);
// Rank-0 string tensors for the "text" plugin, which renders them as Markdown.
std::string texts_event(double wall_time, int64_t step,
                        const std::vector<std::pair<std::string, std::string>>& texts);
// SessionLog.START: TensorBoard drops the points of this file's folder at or after `step` that
// an earlier run wrote, so a resumed run's curves do not double back.
std::string session_start_event(double wall_time, int64_t step);

// The record as it is stored: length, masked CRC32C of the length, data, masked CRC32C of data.
std::string framed_record(std::string_view data);

}  // namespace dtrain::tensorboard
