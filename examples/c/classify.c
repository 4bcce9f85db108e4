/* Classifies an image with the C API: classify MODEL IMAGE [DEVICE]
 *   cc classify.c $(pkg-config --cflags --libs tinycoral) -o classify */
#include <stdio.h>
#include <stdlib.h>
#include <tinycoral/tinycoral.h>

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: classify MODEL IMAGE [auto|usb|sim|cpu]\n");
    return 2;
  }
  tinycoral_interpreter* model = NULL;
  tinycoral_tensor_info out;
  if (tinycoral_interpreter_create(argv[1], argc > 3 ? argv[3] : "auto", &model) ||
      tinycoral_interpreter_set_input_image(model, 0, argv[2]) ||
      tinycoral_interpreter_invoke(model) || tinycoral_interpreter_output_info(model, 0, &out)) {
    fprintf(stderr, "classify: %s\n", tinycoral_last_error());
    tinycoral_interpreter_destroy(model);
    return 2;
  }
  size_t count = 1, best = 0;
  for (int d = 0; d < out.rank; ++d) count *= (size_t)out.shape[d];
  float* scores = malloc(count * sizeof *scores);
  tinycoral_interpreter_output_values(model, 0, scores, count);
  for (size_t i = 1; i < count; ++i)
    if (scores[i] >= scores[best]) best = i; /* ties: the higher index, as the CLI */
  printf("%zu %f\n", best, scores[best]);
  free(scores);
  tinycoral_interpreter_destroy(model);
  return 0;
}
