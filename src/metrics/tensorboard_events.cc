// Event records through the protobuf runtime, from src/metrics/proto (TensorFlow's field numbers).
#include "metrics/tensorboard_events.h"

#include <fmt/format.h>

#include <span>

#include "data/tfrecord_format.h"
#include "metrics/histogram.h"
#include "metrics/proto/event.pb.h"

namespace dtrain::tensorboard {
namespace {

tensorflow::Event event_at(double wall_time, int64_t step) {
  tensorflow::Event event;
  event.set_wall_time(wall_time);
  event.set_step(step);
  return event;
}

std::string serialized(const tensorflow::Event& event) {
  std::string bytes;
  event.SerializeToString(&bytes);
  return bytes;
}

tensorflow::Summary::Value* add_value(tensorflow::Summary* summary, const std::string& tag,
                                      std::string_view plugin) {
  tensorflow::Summary::Value* value = summary->add_value();
  value->set_tag(tag);
  value->mutable_metadata()->mutable_plugin_data()->set_plugin_name(std::string(plugin));
  return value;
}

}  // namespace

std::string event_file_name(int64_t seconds, std::string_view host, int64_t pid, int64_t n) {
  return fmt::format("events.out.tfevents.{:010d}.{}.{}.{}", seconds, host, pid, n);
}

std::string file_version_event(double wall_time) {
  tensorflow::Event event = event_at(wall_time, 0);
  event.set_file_version(std::string(kFileVersion));
  return serialized(event);
}

std::string scalars_event(double wall_time, int64_t step,
                          const std::vector<std::pair<std::string, double>>& scalars) {
  tensorflow::Event event = event_at(wall_time, step);
  for (const auto& [tag, v] : scalars)
    add_value(event.mutable_summary(), tag, "scalars")->set_simple_value(static_cast<float>(v));
  return serialized(event);
}

std::string histograms_event(double wall_time, int64_t step,
                             const std::vector<NamedValues>& tensors) {
  tensorflow::Event event = event_at(wall_time, step);
  for (const NamedValues& tensor : tensors) {
    const Histogram h = make_histogram(tensor.values);
    tensorflow::HistogramProto* histo =
        add_value(event.mutable_summary(), tensor.tag, "histograms")->mutable_histo();
    histo->set_min(h.min);
    histo->set_max(h.max);
    histo->set_num(h.num);
    histo->set_sum(h.sum);
    histo->set_sum_squares(h.sum_squares);
    histo->mutable_bucket_limit()->Add(h.bucket_limit.begin(), h.bucket_limit.end());
    histo->mutable_bucket()->Add(h.bucket.begin(), h.bucket.end());
  }
  return serialized(event);
}

std::string texts_event(double wall_time, int64_t step,
                        const std::vector<std::pair<std::string, std::string>>& texts) {
  tensorflow::Event event = event_at(wall_time, step);
  for (const auto& [tag, text] : texts) {
    tensorflow::TensorProto* tensor =
        add_value(event.mutable_summary(), tag, "text")->mutable_tensor();
    tensor->set_dtype(tensorflow::DT_STRING);
    tensor->mutable_tensor_shape();  // rank 0
    tensor->add_string_val(text);
  }
  return serialized(event);
}

std::string session_start_event(double wall_time, int64_t step) {
  tensorflow::Event event = event_at(wall_time, step);
  event.mutable_session_log()->set_status(tensorflow::SessionLog::START);
  return serialized(event);
}

std::string framed_record(std::string_view data) {
  const auto bytes = std::as_bytes(std::span(data.data(), data.size()));
  const auto header = tfrecord::record_header(data.size());
  const auto footer = tfrecord::record_footer(bytes);
  std::string record;
  record.reserve(header.size() + data.size() + footer.size());
  record.append(reinterpret_cast<const char*>(header.data()), header.size());
  record.append(data);
  record.append(reinterpret_cast<const char*>(footer.data()), footer.size());
  return record;
}

}  // namespace dtrain::tensorboard
