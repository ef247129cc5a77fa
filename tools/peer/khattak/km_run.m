function km_run(model, informat, outformat, form, K, N, inpath, outpath)
% KM_RUN  Run one of Khattak & Mikaitis's tensor-core models on N dot products.
%
%   km_run(MODEL, INFORMAT, OUTFORMAT, FORM, K, N, INPATH, OUTPATH)
%
% Written for tools/peer/khattak_octave.py (mmasim), which extracts the models
% from north-numerical-computing/MATLAB-tensor-core at a pinned commit and puts
% them, CPFloat's MEX and compat/ on the path.  INPATH holds N columns of
% 2*K+1 doubles: the K values of a (a row vector for the model), the K values
% of b (a column vector) and the scalar c, exactly as Validate_TC_models.m
% passes them.  FORM says how the model is called:
%   1  MODEL(1, a, b, 1, c, outformat)            (V100TC)
%   2  MODEL(1, a, b, 1, c, informat, outformat)  (the other NVIDIA models)
%   3  MODEL(1, a, b, 1, c, informat)             (the AMD models)
% OUTPATH receives 2 x N doubles: row 1 the model's result (as a double,
% its sign kept), row 2 a status (0: returned, 1: raised an error).  The
% error messages go to OUTPATH.err, one line per failed case: index, a tab,
% the message.
  fid = fopen(inpath, 'r');
  X = fread(fid, [2 * K + 1, N], 'double');
  fclose(fid);
  f = str2func(model);
  D = zeros(1, N);
  status = zeros(1, N);
  efid = fopen([outpath '.err'], 'w');
  for i = 1:N
    a = X(1:K, i).';
    b = X(K + 1:2 * K, i);
    c = X(2 * K + 1, i);
    try
      switch form
        case 1
          d = f(1, a, b, 1, c, outformat);
        case 2
          d = f(1, a, b, 1, c, informat, outformat);
        otherwise
          d = f(1, a, b, 1, c, informat);
      end
      if numel(d) ~= 1
        error('km_run: the model returned %d values', numel(d));
      end
      D(i) = double(d);
    catch err
      status(i) = 1;
      D(i) = NaN;
      fprintf(efid, '%d\t%s\n', i, strrep(err.message, sprintf('\n'), ' '));
    end
  end
  fclose(efid);
  fid = fopen(outpath, 'w');
  fwrite(fid, [D; status], 'double');
  fclose(fid);
end
